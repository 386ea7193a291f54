"""runtime.observe=bisect on ExecuTorch's real XNNPACK kernels (issue 34, items 4 and 5): a fault
on an op in the middle of the mlp's one XNNPACK partition is named at int8 (the partition logs
only its call's outputs) and at fp16 (ETDump logs no half tensors: nothing is logged, the whole
program is bisected); the clean fp16 run raises no alarm. The only two ExecuTorch-lowering tests
of bisection: the rest is tests/analyze/test_observe_bisect.py on fast backends."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.helpers.configs import compose_config

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(900)]  # lowering on 2 shared cores
FAST = (
    "model=mlp",
    "backend=executorch_xnnpack",
    "runtime.iterations=2",
    "tracking=none",
    "runtime.observe=bisect",
    "analyze.fail_exit_code=false",
)


@pytest.fixture(autouse=True)
def _needs_executorch() -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")


def _run(root: Path, label: str, *overrides: str) -> dict[str, Any]:
    cfg = compose_config(root / label, [*FAST, f"cache_dir={root / 'cache'}", *overrides])
    with open_dict(cfg):
        cfg.run_dir = str(root / label / "run")
    run_pipeline(cfg, print_summary=False)
    summary: dict[str, Any] = json.loads((root / label / "run" / "summary.json").read_text())
    return summary


def test_int8_fault_inside_the_partition_is_named_by_bisection(tmp_path: Path) -> None:
    summary = _run(tmp_path, "int8", "backend.precision=int8", "backend.fault.node=linear_1")
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail" and first["partition_id"] == 0
    assert first["op"] == "linear_1" and first["found_by"] == "bisection"
    assert first["module_hierarchy"] == "hidden.0"
    assert summary["bisection"]["lowerings"] <= math.ceil(math.log2(6)) + 1


def test_fp16_fault_is_named_and_the_clean_run_passes(tmp_path: Path) -> None:
    faulted = _run(tmp_path, "fp16", "backend.precision=fp16", "backend.fault.node=linear_1")
    first = faulted["first_divergence"]
    assert faulted["verdict"] == "fail" and first["op_names"] == ["linear_1"]
    assert first["found_by"] == "bisection" and faulted["bisection"]["scope"] == "program"
    clean = _run(tmp_path, "fp16-clean", "backend.precision=fp16")
    assert clean["verdict"] == "not_evaluated" and clean["first_divergence"] is None
    assert clean["bisection"]["op"] is None and clean["bisection"]["lowerings"] == 1
