"""search=precision at a realistic size (issue 44.6): on a 122-op network whose int8 run misses
its budget, the search finds a set of at most 5% of its ops that meets it within 30 trials
(the baseline and the proving re-run included), and the set holds on its cold re-run; the old
walk, one bisection per needed op, would not have within 30 trials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.searches.minimize import smallest_passing_set
from pipeline.searches.outcomes import local_snr_by_op
from tests.helpers.search_runs import run_search

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
DEEP = ["model=deep_outlier_mlp", "backend=xnnpack", "backend.precision=int8", "tracking=none"]
KEEP_FLOAT = "backend.keep_float="


def _kept(trial: dict[str, Any]) -> set[str] | None:
    """The ops a trial kept float (None: a trial of no keep_float, the baseline)."""
    for override in trial["overrides"]:
        if override.startswith(KEEP_FLOAT):
            return set(override[len(KEEP_FLOAT) :].strip("[]").split(","))
    return None


def _old_search_trials(ranked: list[str], chosen: set[str]) -> int:
    """The trials the search took before (one bisection per needed op over `ranked`) when a
    trial meets the budget exactly when it keeps `chosen` float: the baseline, the bisection's
    distinct sets, the proving re-run."""
    asked: set[frozenset[str]] = set()

    def passes(names: list[str]) -> bool:
        if names:  # none: the baseline, known
            asked.add(frozenset(names))
        return chosen <= set(names)

    assert set(smallest_passing_set(ranked, passes) or []) == chosen
    return 1 + len(asked) + 1


def test_a_few_ops_among_122_are_found_within_30_trials_and_hold(tmp_path: Path) -> None:
    result, found = run_search(tmp_path, "deep", "search=precision", *DEEP, "search.max_trials=30")
    baseline, *trials = found["trial_log"]
    ops = list(dict.fromkeys(baseline["delegated_ops"]))
    assert len(ops) == 122 and baseline["accuracy_met"] is False
    chosen = found["result"]["backend.keep_float"]
    assert found["complete"] is True and len(chosen) <= 0.05 * len(ops)
    assert found["trials"] <= 30 and found["ranked_by"] == "local_snr"
    assert found["verified"]["accuracy_met"] is True and found["verified"]["verdict"] == "pass"
    assert found["verified"]["trial"] == found["trials"]  # the proving re-run, cold
    assert "cache=false" in trials[-1]["overrides"]
    # Every trial met the budget exactly when it kept the chosen ops float: the outcomes are
    # those of "these 6 ops are needed", so the old search can be replayed against it.
    for trial in trials:
        kept = _kept(trial)
        assert kept is not None and trial["accuracy_met"] is (set(chosen) <= kept), trial

    # One bisection per needed op over the ops in graph order (the walk issue 44 saw) ...
    assert _old_search_trials(ops, set(chosen)) == 72
    # ... and over the baseline's local SNR ranking (the old search on this network).
    local = local_snr_by_op(baseline["job_dir"])
    ranked = sorted(ops, key=lambda op: (local.get(op, float("inf")), ops.index(op)))
    assert _old_search_trials(ranked, set(chosen)) == 34
    assert f"keep {len(chosen)} of 122 delegated op(s) float" in result.stdout
