"""backend.precision=8da4w through the whole pipeline on executorch_xnnpack (issue 46.1): a clean
run's every tapped linear is within its expected error (group-wise int4 weights, per-token int8
inputs) and PASSes, with the linear the group size skips listed in summary.json and on the
terminal; a scale fault on one linear FAILs and is named."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from stages.analyze.report.terminal_report import format_terminal_report
from stages.formats.artifacts import ArtifactName

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(1200)]  # lowering on 2 shared cores
# model=mlp: linear (32 → 64), linear_1 (64 → 64), linear_2 (64 → 10); group 64 skips `linear`.
GROUPED = ("backend.precision=8da4w", "backend.group_size=64", "runtime.observe=tap")


def _rows(run_dir: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader((run_dir / ArtifactName.NUMERIC_GAP_CSV).open())
    return {row["op_names"]: row for row in rows}


def test_a_clean_8da4w_run_passes_and_lists_the_linear_left_in_float(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from tests.helpers.executorch_runs import run_tiny_mlp

    summary, _, run_dir = run_tiny_mlp(tiny_cfg, tmp_path, *GROUPED, "inputs.count=4")
    assert summary["precision"] == "8da4w" and summary["group_size"] == 64
    assert summary["left_in_float"] == [
        {"op": "linear", "in_features": 32, "reason": "in_features 32 not divisible by group 64"}
    ]
    assert summary["verdict"] == "pass", summary["verdict_reason"]
    rows = _rows(run_dir)
    for ops in ('["linear_1", "relu_1"]', '["linear_2"]'):  # the two grouped linears
        row = rows[ops]
        # int4 weights cost ~20 dB here; the runtime is within a dB of what the scheme costs
        assert float(row["observed_snr_db"]) < 30.0, row
        assert abs(float(row["excess_db"])) < 1.0, row
    terminal = format_terminal_report(run_dir / ArtifactName.SUMMARY_JSON)
    assert "left in float (group 64): linear (in_features 32 not divisible by group 64)" in terminal


def test_a_scale_fault_on_one_8da4w_linear_fails_and_is_named(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from tests.helpers.executorch_runs import run_tiny_mlp

    summary, _, run_dir = run_tiny_mlp(
        tiny_cfg,
        tmp_path,
        *GROUPED,
        "inputs.count=4",
        "backend.fault.node=linear_1",
        "backend.fault.kind=scale",
        "backend.fault.value=1.5",
    )
    assert summary["verdict"] == "fail", summary["verdict_reason"]
    assert summary["first_divergence"]["fault_nodes"][0] == "linear_1"
    assert float(_rows(run_dir)['["linear_2"]']["excess_db"]) < 1.0  # the next linear is clean
