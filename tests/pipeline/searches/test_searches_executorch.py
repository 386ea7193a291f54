"""A search on ExecuTorch's own XNNPACK delegate (issue 36.3 on every backend): the delegation
search names the faulted op through ExecuTorch's partitioner, on a one-op model so the whole
search is three ExecuTorch lowerings (the run, the op kept off, the proving re-run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.search_runs import run_search

pytestmark = [pytest.mark.e2e, pytest.mark.executorch, pytest.mark.timeout(900)]
ONE_LINEAR = [
    "model=custom",
    "model._target_=torch.nn.Linear",
    "model.kwargs.in_features=8",
    "model.kwargs.out_features=4",
    "model.inputs=[{shape:[2,8]}]",
]


def test_delegation_search_on_executorch_xnnpack_keeps_the_faulted_op_off(tmp_path: Path) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    result, found = run_search(
        tmp_path,
        "sweep",
        "search=delegation",
        *ONE_LINEAR,
        "backend=executorch_xnnpack",
        "backend.fault.node=linear",
        "search.max_trials=4",
        "tracking=none",
    )
    sweep, output = tmp_path / "sweep", result.stdout + result.stderr
    assert found["kind"] == "delegation" and found["result"] == {"backend.keep_off": ["linear"]}
    assert found["trials"] == 3 and found["verified"]["verdict"] == "pass"
    baseline = json.loads((sweep / "trial-001" / "lowering.json").read_text())
    assert baseline["delegated_ops"] == ["linear"] and baseline["fault_injected"] is not None
    kept = json.loads((sweep / "trial-002" / "lowering.json").read_text())
    assert kept["delegated_ops"] == [] and kept["fault_injected"] is None
    # One progress line per trial, no pipeline summary per trial; the search's own summary.
    assert output.count("search: trial ") == 3 and "== pipeline summary ==" not in output
    assert "result (paste): 'backend.keep_off=[linear]'" in result.stdout
