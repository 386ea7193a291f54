"""A `nan` fault on ExecuTorch's XNNPACK lowers, runs and is analysed at every precision (issue
44: at int8 PT2E's calibration refused the NaN, `torch.histc: range of [nan, nan] is not
finite`); the verdict names the faulted op and every file is strict JSON."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from tests.helpers.executorch_runs import run_on_executorch
from tests.helpers.strict_json import strict_json_files
from tests.helpers.user_models import IMPL_WRAPPED, IMPL_WRAPPED_INPUTS


@pytest.mark.executorch
@pytest.mark.timeout(600)  # lowering twice (shipped + tapped) on 2 shared cores
@pytest.mark.parametrize(
    ("target", "precision"),
    [("conv2d", "int8"), ("linear", "int8"), ("conv2d", "fp16"), ("linear", "fp32")],
)
def test_a_nan_fault_is_lowered_run_and_named(
    make_cfg: Callable[..., DictConfig], tmp_path: Path, target: str, precision: str
) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    _, _, run_dir = run_on_executorch(
        make_cfg,
        tmp_path / "run",
        tmp_path / "cache",
        "model=custom",
        *IMPL_WRAPPED,
        IMPL_WRAPPED_INPUTS,
        f"backend.precision={precision}",
        f"backend.fault.node={target}",
        "backend.fault.kind=nan",
        "runtime.observe=tap",  # a value per op: the op named, not its whole partition
    )
    files = strict_json_files(run_dir)
    summary = files["summary.json"]
    assert files["lowering.json"]["fault_injected"]["kind"] == "nan"
    assert summary["verdict"] == "fail"
    assert summary["first_divergence"]["fault_nodes"][0] == target
