"""Taps of convs a BatchNorm was folded into (int8 on ExecuTorch's XNNPACK, runtime.observe=tap),
through the pipeline: the folded kernel's value is compared with the BatchNorm's output, not the
conv's, so a clean run passes (before: a false FAIL at the conv, 10.5 dB, the SNR of a conv
against its own BatchNorm), and a fault on that conv is still named there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(900)]


def _run(make_cfg: Callable[..., DictConfig], tmp_path: Path, *overrides: str) -> dict[str, Any]:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from tests.helpers.executorch_runs import run_on_executorch

    summary, rows, _ = run_on_executorch(
        make_cfg,
        tmp_path / "run",
        tmp_path / "cache",
        "model=custom",
        "model._target_=tests.helpers.block_patterns.make_block",
        "model.inputs=[{shape:[1,3,16,16]}]",
        "backend.precision=int8",
        "runtime.observe=tap",
        "runtime.debug_level=intermediate_outputs",
        *overrides,
    )
    return {**summary, "rows": rows}


@pytest.mark.parametrize("block", ["conv_bn_hardswish", "squeeze_excite"])
def test_a_clean_tapped_int8_block_passes_with_the_batchnorm_in_the_convs_row(
    make_cfg: Callable[..., DictConfig], tmp_path: Path, block: str
) -> None:
    summary = _run(make_cfg, tmp_path, f"model.kwargs.name={block}")
    assert summary["verdict"] == "pass", summary.get("first_divergence")
    assert summary["instrumentation"]["refused"] == []
    (conv,) = [r for r in summary["rows"] if json.loads(r["op_names"])[0] == "conv2d"]
    assert "batch_norm" in conv["op_names"], conv["op_names"]  # its group ends at the BatchNorm
    assert float(conv["observed_snr_db"]) > 30.0, conv


def test_a_fault_on_the_conv_a_batchnorm_was_folded_into_is_named_there(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    summary = _run(
        make_cfg,
        tmp_path,
        "model.kwargs.name=conv_bn_hardswish",
        "backend.fault.node=conv2d",
        "backend.fault.kind=scale",
        "backend.fault.value=1.5",
    )
    assert summary["verdict"] == "fail"
    assert summary["first_divergence"]["op_names"][0] == "conv2d"


def test_a_tapped_padded_residual_is_evaluated_row_by_row(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    """MobileNetV2's pad reading a BatchNorm and a residual add of two BatchNorms: each
    BatchNorm's tapped value stands in for aten's value-and-statistics op, so the expected
    error's re-run no longer reaches past it to values the walk released (before: 4 of 8 rows
    not evaluated, KeyError: x)."""
    summary = _run(make_cfg, tmp_path, "model.kwargs.name=padded_residual")
    assert summary["verdict"] == "pass", summary.get("first_divergence")
    assert len(summary["rows"]) == 8
    assert not [r["op_names"] for r in summary["rows"] if r.get("expected_fallback")]
