"""search=delegation: the smallest `backend.keep_off` set whose ops, run off the delegate by the
portable runtime, make a FAILing run pass (for a delegate author: which kernel is wrong)."""

from __future__ import annotations

from pipeline.searches.minimize import smallest_passing_set
from pipeline.searches.result import SearchError, SearchResult, verified_record
from pipeline.searches.trials import UNTIMED, TrialRunner, list_override

KEEP_OFF = "backend.keep_off"


# A trial after the baseline needs the verdict, not the plots (the proving re-run keeps them).
VERDICT_SCOPE = "analyze.scope=verdict"


def delegation_held(verdict: object, task_met: object, baseline_failed: bool | None) -> bool:
    """A delegation trial's success. For a FAILing run: its verdict passes; for a run that
    missed its task budget (analyze.accuracy_budget.max_drop) alone: no FAIL and the task within
    the budget; either way never a missed task budget. `baseline_failed` None (unknown): either."""
    if task_met is False:
        return False
    for_fail = verdict == "pass"
    for_task = verdict != "fail" and task_met is True
    if baseline_failed is None:
        return for_fail or for_task
    return for_fail if baseline_failed else for_task


def keep_off(names: list[str]) -> list[str]:
    return [list_override(KEEP_OFF, sorted(names))] if names else []


def _ranked(ops: list[str], first: list[str]) -> list[str]:
    """The first divergence's ops, then the ops before it nearest first, then the rest."""
    at = [op for op in ops if op in first]
    if not at:
        return list(ops)
    index = ops.index(at[-1])
    before = [op for op in reversed(ops[:index]) if op not in at]
    after = [op for op in ops[index + 1 :] if op not in at]
    return at + before + after


def delegation_search(runner: TrialRunner) -> SearchResult:
    """Bisect over delegated ops ranked around the first divergence; verify once, cold."""
    runner.share([VERDICT_SCOPE, *UNTIMED], "judged by their verdict alone, no plots, untimed")
    baseline = runner.run([[]])[0]
    if baseline.failed:
        raise SearchError(f"the run without overrides failed: {baseline.error}")
    failed = baseline.verdict == "fail"
    if not failed and baseline.task_met is not False:
        return SearchResult(
            "delegation",
            {KEEP_OFF: []},
            f"the run's verdict is {baseline.verdict}: nothing to keep off the delegate",
        )
    ops = list(dict.fromkeys(baseline.delegated_ops))

    def passes(names: list[str]) -> bool:
        if not names:
            return False  # the baseline, which fails or misses its task budget
        trial = runner.run([[*keep_off(names), VERDICT_SCOPE, *UNTIMED]])[0]
        return delegation_held(trial.verdict, trial.task_met, failed)

    chosen = smallest_passing_set(_ranked(ops, baseline.first_divergence_nodes), passes)
    if chosen is None:
        return SearchResult(
            "delegation",
            None,
            "the run FAILs even with every op off the delegate: the delegate is not the cause",
        )
    proof = runner.run([[*keep_off(chosen), "cache=false"]], reuse=False)[0]
    message = f"keep {len(chosen)} of {len(ops)} delegated op(s) off the delegate"
    return SearchResult(
        "delegation", {KEEP_OFF: sorted(chosen)}, message, True, verified_record(proof)
    )
