"""MobileNetV2's pad reading a BatchNorm, on the emulated xnnpack at int8 and fp16 (a small
block, tests.helpers.block_patterns `padded_residual`). The delegate logs each BatchNorm's value,
aten's op also returns its batch statistics: before the stand-in took that one value for the
op's tuple, the BatchNorms counted as unobserved, the pad was judged on the int8 error of the
convs and BatchNorms before it against a float budget (a false FAIL: 34.0 dB observed, 40.4 dB
expected) and the expected error of the residual add's group and of two convs failed
(KeyError: the walk had released what their upstream re-run read). A fault on a conv still
fails there."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.analyze_runs import read_summary
from tests.helpers.configs import compose_config

pytestmark = pytest.mark.timeout(600)

_BLOCK = (
    "model=custom",
    "model._target_=tests.helpers.block_patterns.make_block",
    "model.kwargs.name=padded_residual",
    "model.inputs=[{shape:[1,3,16,16]}]",
    "backend=xnnpack",
)


def _run(tmp_path: Path, *overrides: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    from omegaconf import open_dict

    from pipeline.runner import run_pipeline

    cfg = compose_config(tmp_path, [*_BLOCK, "tracking=none", *overrides])
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    run_pipeline(cfg, print_summary=False)
    run_dir = Path(cfg.run_dir)
    with (run_dir / "numeric_gap.csv").open() as f:
        return read_summary(run_dir), list(csv.DictReader(f))


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_a_clean_padded_residual_passes_with_every_row_evaluated(
    tmp_path: Path, precision: str
) -> None:
    summary, rows = _run(tmp_path, f"backend.precision={precision}")
    assert summary["verdict"] == "pass", summary["verdict_reason"]
    assert len(rows) == 7 and not [r["op_names"] for r in rows if r.get("expected_fallback")]
    (pad,) = [r for r in rows if json.loads(r["op_names"]) == ["pad"]]
    assert pad["diverged"] == "False", pad
    assert float(pad["observed_snr_db"]) == math.inf  # the pad re-ran on the runtime's BatchNorm


def test_a_fault_on_a_conv_before_the_pad_still_fails_there(tmp_path: Path) -> None:
    summary, _ = _run(
        tmp_path, "backend.precision=int8", "backend.fault.node=conv2d_2", "backend.fault.value=1.1"
    )
    assert summary["verdict"] == "fail", summary["verdict_reason"]
    assert "conv2d_2" in summary["first_divergence"]["op_names"], summary["first_divergence"]
