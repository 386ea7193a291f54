"""A search exits 0 only with a result that held on its proving re-run (issue 44): one that ran
out of trials (search.max_trials) and a reduce that found no cut exit 1, through the real CLI,
and say why on stderr; search.json keeps what they found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.searches.exit_codes import SEARCH_FAILED_EXIT_CODE
from tests.helpers.cli_runner import run_module

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
FAULTY_MLP = ["model=mlp", "backend.fault.node=linear_1", "tracking=none"]
# Its fault shows only when a partition holds the whole MLP (its 6 ops): no cut of the ops up
# to the first divergence fails the same way.
WHOLE_PROGRAM_FAULT = """
from stages.backends.xnnpack import XnnpackBackend


class WholeProgramFault(XnnpackBackend):
    name = "whole_program_fault"

    def preprocess(self, partition, compile_specs):
        self.whole = len(partition.nodes) >= 6
        return super().preprocess(partition, compile_specs)

    def fault_for(self, nodes):
        found = super().fault_for(nodes)
        return found if self.whole else None
"""


def _search(tmp_path: Path, *args: str) -> tuple[str, str, dict[str, Any]]:
    result = run_module(
        "pipeline",
        "-m",
        *args,
        "hydra.sweep.dir=sweep",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
    )
    assert result.returncode == SEARCH_FAILED_EXIT_CODE == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    found = json.loads((tmp_path / "sweep" / "search.json").read_text())
    return result.stdout, result.stderr, found


def test_a_search_that_runs_out_of_trials_exits_1_with_its_best_so_far(tmp_path: Path) -> None:
    out, err, found = _search(
        tmp_path, "search=delegation", "backend=xnnpack", *FAULTY_MLP, "search.max_trials=2"
    )
    assert found["result"] is None and found["complete"] is False
    assert found["best_so_far"]["overrides"] == {"backend.keep_off": ["linear_1"]}
    assert "search.max_trials=2 trials ran before the search ended" in out
    assert err.startswith("search: no result that holds (search.max_trials=2")


def test_a_reduce_that_finds_no_cut_exits_1(tmp_path: Path) -> None:
    (tmp_path / "whole_program_fault.py").write_text(WHOLE_PROGRAM_FAULT)
    out, err, found = _search(
        tmp_path,
        "search=reduce",
        "backend._target_=./whole_program_fault.py:WholeProgramFault",
        *FAULTY_MLP,
    )
    baseline, *cuts = found["trial_log"]
    assert baseline["verdict"] == "fail" and cuts and all(t["verdict"] == "pass" for t in cuts)
    assert found["result"] is None and found["verified"] is None
    assert "no cut of the ops up to the first divergence fails the same way" in found["message"]
    assert "repro:" not in out and not (tmp_path / "sweep" / "repro").exists()
    assert err.startswith("search: no result that holds (no cut of the ops")
