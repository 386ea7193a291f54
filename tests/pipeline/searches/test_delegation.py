"""search=delegation judged against the task budget too: a trial whose verdict passes but whose
task drop exceeds analyze.accuracy_budget.max_drop has not succeeded; the outcome read back from
a trial's summary.json carries the task's `met` and drop."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.searches.delegation import delegation_held
from pipeline.searches.exit_codes import _held
from pipeline.searches.outcomes import read_outcome
from pipeline.searches.trials import progress_line


def test_a_passing_verdict_with_a_missed_task_budget_is_no_success() -> None:
    assert delegation_held("pass", None, True)  # no task budget: the verdict alone
    assert not delegation_held("pass", False, True)
    assert not delegation_held("fail", True, True)
    # A run that missed only its task budget: no FAIL and the task within it.
    assert delegation_held("not_evaluated", True, False)
    assert not delegation_held("pass", None, False)  # the task not evaluated proves nothing
    verified = {"kind": "delegation", "result": {}, "verified": {"verdict": "pass"}}
    assert _held(verified)
    verified["verified"] = {"verdict": "pass", "task_met": False}
    assert not _held(verified)


def test_a_trial_outcome_carries_its_task_drop_and_met(tmp_path: Path) -> None:
    summary = {
        "verdict": "pass",
        "accuracy": {
            "met": False,
            "outputs": [{"snr_db": 39.2}],
            "task": {"name": "classification", "met": False, "drop": 2.5},
        },
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    outcome = read_outcome(3, ["backend.keep_off=[linear]"], tmp_path)
    assert (outcome.task_met, outcome.task_drop, outcome.accuracy_met) == (False, 2.5, False)
    line = progress_line(outcome, 40)
    assert "verdict pass, min output SNR 39.20 dB, task drop 2.5, budget missed" in line
