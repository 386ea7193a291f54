"""search=precision: a minimal `backend.keep_float` set meeting the accuracy budget, and a per-op
sensitivity table (accuracy with only that op low precision, and with only it kept float) when
its 2 trials per op fit in search.max_trials.

The ops are ranked (by the table, else by the baseline's local SNR per fused kernel); the shortest
prefix of that ranking that meets the budget is found once (galloping, then binary), and then
shrunk: blocks of it, least likely needed first, are made low precision again while the budget
holds, a block that breaks it halved (`minimize.ranked_then_shrunk`). The needed ops share one
halving instead of a bisection each: on the zoo's deep_outlier_mlp (122 ops, 6 of them needed)
23 trials between the baseline and the proving re-run, where one bisection per needed op took
32."""

from __future__ import annotations

import math
from pathlib import Path

from pipeline.searches.minimize import ranked_then_shrunk
from pipeline.searches.outcomes import TrialOutcome, local_snr_by_op
from pipeline.searches.result import SearchError, SearchResult, verified_record
from pipeline.searches.sensitivity_report import Sensitivity, write_sensitivity_files
from pipeline.searches.trials import UNTIMED, TrialRunner, list_override

KEEP_FLOAT = "backend.keep_float"


# A trial after the baseline needs only the end-to-end accuracy: its per-op gaps and plots
# (most of a ViT trial's analysis) are left out; the baseline and the proving re-run keep them.
ACCURACY_SCOPE = "analyze.scope=accuracy"


def keep_float(names: list[str]) -> list[str]:
    """The trial overrides that keep `names` at fp32 (none: the baseline)."""
    return [list_override(KEEP_FLOAT, sorted(names))] if names else []


def accuracy_trial(names: list[str]) -> list[str]:
    """A trial keeping `names` at fp32, judged by its accuracy alone."""
    return [*keep_float(names), ACCURACY_SCOPE, *UNTIMED]


def _snr(outcome: TrialOutcome) -> float | None:
    return outcome.min_snr_db


def sensitivities(runner: TrialRunner, ops: list[str]) -> list[Sensitivity]:
    """Two trials per op, launched as one batch (they are independent)."""
    batch = [accuracy_trial([o for o in ops if o != op]) for op in ops] + [
        accuracy_trial([op]) for op in ops
    ]
    found = runner.run(batch)
    low, kept = found[: len(ops)], found[len(ops) :]
    return [
        Sensitivity(op, _snr(low[i]), _snr(kept[i]), kept[i].accuracy_met)
        for i, op in enumerate(ops)
    ]


def _units(ops: list[str], table: list[Sensitivity], local: dict[str, float]) -> list[list[str]]:
    """The ops in the order the search tries them, most likely needed first, grouped in units
    it adds together. With the sensitivity table, one op a unit: those that hurt most when they
    alone are low precision first; ties by how much keeping only them float helps, then by the
    local SNR, then graph order. Without it, by the baseline's local SNR (lowest first): ops
    that share a value (a fused kernel's row, or a partition's compared whole) form one unit, and
    ops with none (or an exact match) one last unit, so a run without per-op values is searched
    from every op float down."""
    if table:
        by_op = {row.op: row for row in table}

        def key(op: str) -> tuple[float, float, float, int]:
            row = by_op.get(op)
            kept = row.snr_only_float_db if row and row.snr_only_float_db is not None else -math.inf
            low = row.snr_only_low_db if row and row.snr_only_low_db is not None else math.inf
            return (low, -kept, local.get(op, math.inf), ops.index(op))

        return [[op] for op in sorted(ops, key=key)]
    units: dict[float, list[str]] = {}
    for op in ops:
        units.setdefault(local.get(op, math.inf), []).append(op)
    return [units[value] for value in sorted(units)]


def _baseline(runner: TrialRunner) -> TrialOutcome:
    baseline = runner.run([[]])[0]
    if baseline.failed:
        raise SearchError(f"the run without overrides failed: {baseline.error}")
    if baseline.accuracy_met is None:
        raise SearchError(
            "the run's accuracy was not evaluated (summary.json accuracy.met is null), so there "
            "is nothing to search against; see its summary.json accuracy.reason"
        )
    return baseline


def precision_search(
    runner: TrialRunner, sensitivity: bool, out_dir: Path, budget_db: float
) -> SearchResult:
    """The shortest passing prefix of the ranked ops, shrunk; verified once by a cold re-run."""
    runner.share([ACCURACY_SCOPE, *UNTIMED], "judged by their accuracy alone, untimed")
    baseline = _baseline(runner)
    ops = list(dict.fromkeys(baseline.delegated_ops))
    if baseline.accuracy_met:
        return SearchResult("precision", {KEEP_FLOAT: []}, "the run meets its budget as it is")
    # The baseline, the table, a bisection trial and the proving re-run (counted from the start,
    # so a resumed search decides as its first run did).
    affordable = 1 + 2 * len(ops) + 2 <= runner.max_trials
    table = sensitivities(runner, ops) if sensitivity and affordable else []
    extra = write_sensitivity_files(out_dir, table, budget_db) if table else {}
    if sensitivity and not affordable:
        extra["sensitivity_skipped"] = (
            f"{2 * len(ops)} trials for {len(ops)} ops would exceed search.max_trials="
            f"{runner.max_trials}; ranked by the baseline's local SNR instead"
        )

    def passes(names: list[str]) -> bool:
        if not names:
            return False  # the baseline, which misses its budget
        return runner.run([accuracy_trial(names)])[0].accuracy_met is True

    local = local_snr_by_op(baseline.job_dir)
    units = _units(ops, table, local)
    extra["ranked_by"] = "sensitivity" if table else "local_snr" if local else "none"
    chosen = ranked_then_shrunk(units, passes)
    if chosen is None:
        return SearchResult(
            "precision",
            None,
            "even with every delegated op kept float the run misses its budget: the loss is "
            "outside the delegate (inputs, or ops it does not take)",
            extra=extra,
        )
    proof = runner.run([[*keep_float(chosen), "cache=false"]], reuse=False)[0]
    message = f"keep {len(chosen)} of {len(ops)} delegated op(s) float"
    return SearchResult(
        "precision", {KEEP_FLOAT: sorted(chosen)}, message, True, verified_record(proof), extra
    )
