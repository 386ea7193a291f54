"""A search stopped by search.max_trials still gives the smallest set its finished trials
proved, as an override to paste, flagged as not shown minimal."""

from __future__ import annotations

from pathlib import Path

from pipeline.searches.best_so_far import best_so_far, listed
from pipeline.searches.driver import _budget_spent
from pipeline.searches.outcomes import TrialOutcome
from pipeline.searches.trials import TrialBudgetSpent, TrialRunner


def _outcome(
    number: int, names: list[str] | None, met: bool | None, verdict: str = "pass"
) -> TrialOutcome:
    overrides = [] if names is None else [f"backend.keep_float=[{','.join(names)}]"]
    return TrialOutcome(number, overrides, f"trial-{number:03d}", verdict, met)


def test_the_smallest_proved_set_wins_and_unproved_or_failed_trials_never_do() -> None:
    failed = _outcome(4, ["a"], True)
    failed.error = "the job failed"
    outcomes = [
        _outcome(0, None, False),  # the baseline misses the budget
        _outcome(1, ["a", "b", "c", "d"], True),
        _outcome(2, ["a", "b"], False),  # smaller, but not proved
        _outcome(3, ["c", "d"], True),
        failed,
        _outcome(5, ["b", "c"], True),  # as small as trial 3: the earlier one is kept
    ]
    best = best_so_far("precision", outcomes)
    assert best == {
        "overrides": {"backend.keep_float": ["c", "d"]},
        "trial": 3,
        "ops": 2,
        "minimal": False,
    }
    assert best_so_far("precision", outcomes[:1]) is None
    assert best_so_far("reduce", outcomes) is None


def test_delegation_proves_by_the_verdict() -> None:
    off = TrialOutcome(7, ["backend.keep_off=[matmul_3]"], "t", "pass", False)
    still = TrialOutcome(8, ["backend.keep_off=[]"], "t", "fail", True)
    assert best_so_far("delegation", [still, off]) == {
        "overrides": {"backend.keep_off": ["matmul_3"]},
        "trial": 7,
        "ops": 1,
        "minimal": False,
    }
    assert listed(["backend.keep_off=matmul_3"], "backend.keep_off") is None


def test_a_spent_budget_names_the_best_set_to_paste(tmp_path: Path) -> None:
    runner = TrialRunner(launcher=None, base=[], sweep_dir=tmp_path, ledger=None, max_trials=3)
    runner.outcomes = [_outcome(0, None, False), _outcome(1, ["x", "y"], True)]
    found = _budget_spent("precision", TrialBudgetSpent("3 trials ran"), runner)
    assert found.result is None and not found.complete
    assert "raise search.max_trials" in found.message
    assert "trial 1 (2 op(s), passing but not shown minimal): 'backend.keep_float=[x,y]'" in (
        found.message
    )
    assert found.extra["best_so_far"]["overrides"] == {"backend.keep_float": ["x", "y"]}
    runner.outcomes = runner.outcomes[:1]
    assert "best so far" not in _budget_spent("precision", TrialBudgetSpent("3"), runner).message
