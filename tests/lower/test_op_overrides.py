"""backend.keep_float / backend.keep_off (issue 36.2) on the outlier MLP: keeping the outlier
activation's producer and consumer float restores accuracy; a kept-off op leaves the delegate
(and a fault aimed at it with it); unknown names and backends that cannot honour them are
refused before lowering."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import DictConfig

from pipeline.errors import ConfigValueError
from pipeline.runner import run_pipeline
from stages.backends.xnnpack import XnnpackBackend
from stages.lower.fault_target import operator_nodes
from stages.lower.op_overrides import UnknownOpError, check_op_names

INT8 = ["model=outlier_mlp", "backend=xnnpack", "backend.precision=int8", "tracking=none"]


class NoKeepFloatBackend(XnnpackBackend):
    """A user's backend that does not compute ops at fp32 on request."""

    name = "no_float_npu"
    honours_keep_float = False


def _run(cfg: DictConfig) -> dict[str, Any]:
    result = run_pipeline(cfg, print_summary=False)
    return {
        "summary": json.loads((result.run_dir / "summary.json").read_text()),
        "lowering": json.loads((result.run_dir / "lowering.json").read_text()),
    }


def test_keep_float_meets_the_budget_the_int8_run_misses(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    plain = _run(make_cfg(*INT8))["summary"]
    assert plain["verdict"] == "pass" and plain["accuracy"]["met"] is False
    kept = _run(
        make_cfg(*INT8, "backend.keep_float=[linear_1,linear_2]", f"run_dir={tmp_path / 'kept'}")
    )
    assert kept["summary"]["accuracy"]["met"] is True
    assert kept["summary"]["accuracy"]["outputs"][0]["snr_db"] > 30
    assert kept["lowering"]["op_overrides"] == {
        "keep_float": ["linear_1", "linear_2"],
        "keep_off": [],
    }
    one = _run(make_cfg(*INT8, "backend.keep_float=[linear_2]", f"run_dir={tmp_path / 'one'}"))[
        "summary"
    ]
    assert one["accuracy"]["met"] is False  # linear_1's int8 output already lost the small channels


def test_keep_off_leaves_the_op_to_the_portable_runtime_unfaulted(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    mlp = ["model=mlp", "backend=xnnpack", "tracking=none", "backend.fault.node=linear_1"]
    faulted = _run(make_cfg(*mlp))["summary"]
    assert faulted["verdict"] == "fail"
    off = _run(make_cfg(*mlp, "backend.keep_off=[linear_1]", f"run_dir={tmp_path / 'off'}"))
    delegated = [op for p in off["lowering"]["partitions"] for op in p["ops"]]
    assert "linear_1" not in delegated and "relu_1" in delegated
    reasons = {r["node"]: r["reason"] for r in off["lowering"]["rejected_ops"]}
    assert reasons["linear_1"] == "kept off the delegate by backend.keep_off"
    assert off["lowering"]["fault_injected"] is None
    assert off["summary"]["verdict"] == "pass"


def test_an_unknown_op_is_refused_before_any_stage_with_what_it_could_be(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    with pytest.raises(ConfigValueError, match=r"'linear_9'.*did you mean.*linear_1"):
        run_pipeline(make_cfg(*INT8, "backend.keep_float=[linear_9]"), print_summary=False)
    assert not (tmp_path / "run").exists()  # the export ran into the cache, not a run dir
    with pytest.raises(ConfigValueError, match=r"backend\.keep_off: 'nope'"):
        run_pipeline(make_cfg(*INT8, "backend.keep_off=[nope]"), print_summary=False)
    with pytest.raises(ConfigValueError, match=r"backend\.fault\.node: 'linear_22'.*linear_2"):
        run_pipeline(make_cfg(*INT8, "backend.fault.node=linear_22"), print_summary=False)
    assert not (tmp_path / "run").exists()


def test_a_backend_that_cannot_keep_float_is_refused_before_any_stage(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    target = f"{__name__}.NoKeepFloatBackend"
    cfg = make_cfg(*INT8, f"backend._target_={target}", "backend.keep_float=[linear_1]")
    with pytest.raises(ConfigValueError, match="honours_keep_float"):
        run_pipeline(cfg, print_summary=False)
    assert not (tmp_path / "run" / "exported.pt2").exists()


def test_every_option_is_checked_against_one_walk_of_the_program() -> None:
    class TwoLinears(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.second(torch.relu(self.first(x)))

    program = torch.export.export(TwoLinears(), (torch.randn(1, 4),))
    nodes = operator_nodes(program.graph_module)
    check_op_names(nodes, {"backend.keep_float": ["linear"], "backend.fault.node": ["relu"]})
    named = {"backend.keep_float": ["linear"], "backend.keep_off": ["relux"], "x": ["nope"]}
    with pytest.raises(UnknownOpError, match=r"^backend\.keep_off: 'relux' .*did you mean: relu"):
        check_op_names(nodes, named)  # the first unknown name, in the options' order
