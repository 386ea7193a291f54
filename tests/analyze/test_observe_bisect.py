"""runtime.observe=bisect end to end on fast backends: an author's backend that logs no
intermediate outputs (docs/examples/npu_backend.py, `bug=no_outputs`: its partition is compared
as a whole) and the emulated qnn at int8 with no intermediate outputs logged at all (the whole
program is bisected, as at fp16 on ExecuTorch). The op holding a fault is named, found by
bisection in O(log N) lowerings that the stage cache serves again; clean runs raise no alarm."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from omegaconf import open_dict

from pipeline.errors import ConfigValueError
from pipeline.runner import run_pipeline
from stages.analyze.report.terminal_report import format_terminal_report
from tests.helpers.cli_runner import REPO
from tests.helpers.configs import compose_config

NPU = f"backend._target_={REPO / 'docs' / 'examples' / 'npu_backend.py'}:NpuBackend"
SILENT_NPU = (NPU, "+backend.compile_specs.bug=no_outputs")
NOTHING_LOGGED_QNN = (
    "backend=qnn",
    "backend.precision=int8",
    "runtime.debug_level=program_outputs",
)
FAST = ("model=mlp", "runtime.iterations=2", "tracking=none", "runtime.observe=bisect")
MLP_OPS = 6  # linear, relu, linear_1, relu_1, add, linear_2


class Runs:
    """Tiny runs sharing one stage cache; `run(label, *overrides)` -> summary.json."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run(self, label: str, *overrides: str) -> dict[str, Any]:
        cfg = compose_config(
            self.root / label, [*FAST, f"cache_dir={self.root / 'cache'}", *overrides]
        )
        with open_dict(cfg):
            cfg.run_dir = str(self.root / label / "run")
        run_pipeline(cfg, print_summary=False)
        summary: dict[str, Any] = json.loads(
            (self.root / label / "run" / "summary.json").read_text()
        )
        summary["_dir"] = str(self.root / label / "run")
        return summary


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(tmp_path_factory.mktemp("observe_bisect"))


def _within_log_n(bisection: dict[str, Any]) -> None:
    assert 1 <= bisection["lowerings"] <= math.ceil(math.log2(MLP_OPS)) + 1
    assert bisection["lowerings"] == len(bisection["cuts"])


def test_a_silent_partition_is_blamed_on_the_op_bisection_finds(runs: Runs) -> None:
    summary = runs.run("npu-fault", *SILENT_NPU, "backend.fault.node=linear_1")
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail" and first["partition_id"] == 0
    assert first["op"] == "linear_1" and first["found_by"] == "bisection"
    assert first["narrowed"] is True and first["module_hierarchy"] == "hidden.0"
    ops = {o["op"]: o for o in first["ops_in_order"]}
    assert first["source_line"] == ops["linear_1"]["source_line"] != ops["linear"]["source_line"]
    assert "found by bisection" in first["note"]
    _within_log_n(summary["bisection"])
    assert summary["bisection"]["scope"] == "partition 0"
    cuts = {c["after_op"]: c["diverged"] for c in summary["bisection"]["cuts"]}
    assert cuts["relu"] is False and cuts.get("linear_1", True) is True
    text = format_terminal_report(Path(summary["_dir"]) / "summary.json")
    assert f"op linear_1: found by bisection, {first['lowerings']} lowerings" in text


def test_a_clean_silent_partition_passes_without_bisecting(runs: Runs) -> None:
    summary = runs.run("npu-clean", *SILENT_NPU)
    assert summary["verdict"] == "pass" and summary["bisection"] is None


def test_a_program_that_logged_nothing_is_bisected_to_the_faulted_op(runs: Runs) -> None:
    """int8 on the emulated qnn, no intermediate output logged: without bisection the verdict
    is not evaluated; with it the op holding the fault is the first divergence."""
    summary = runs.run("qnn-fault", *NOTHING_LOGGED_QNN, "backend.fault.node=relu_1")
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail" and first["op_names"] == ["relu_1"]
    assert first["found_by"] == "bisection" and first["source_line"].startswith("zoo/mlp.py:23")
    assert summary["bisection"]["scope"] == "program"
    _within_log_n(summary["bisection"])
    # The accumulated int8 error of the ops before it is within what int8 should cost.
    assert all(c["diverged"] is (c["ops"] >= 4) for c in summary["bisection"]["cuts"])


def test_a_clean_int8_program_costs_one_lowering_and_no_alarm(runs: Runs) -> None:
    summary = runs.run("qnn-clean", *NOTHING_LOGGED_QNN)
    assert summary["verdict"] == "not_evaluated" and summary["first_divergence"] is None
    assert summary["bisection"]["op"] is None and summary["bisection"]["lowerings"] == 1


def test_lowerings_are_reused_from_the_stage_cache(runs: Runs) -> None:
    """The same bisection in another run dir (the analysis re-run: another top_k) lowers nothing."""
    first = runs.run("qnn-fault", *NOTHING_LOGGED_QNN, "backend.fault.node=relu_1")["bisection"]
    again = runs.run(
        "qnn-fault-again", *NOTHING_LOGGED_QNN, "backend.fault.node=relu_1", "analyze.top_k=7"
    )["bisection"]
    assert again["op"] == first["op"] == "relu_1"
    assert again["lowerings_reused"] == again["lowerings"] == first["lowerings"]


def test_bisect_needs_the_expected_error_rule(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*FAST, "analyze.verdict_rule=threshold"])
    with pytest.raises(ConfigValueError, match=r"analyze\.verdict_rule=expected"):
        run_pipeline(cfg, print_summary=False)
