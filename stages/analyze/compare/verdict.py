"""The verdict: each op's observed local error against its expected error plus a margin (or, with
`analyze.verdict_rule=threshold`, one threshold per precision); the first divergence in graph order."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stages.analyze.compare.comparators import Comparator, crosses
from stages.analyze.compare.exact_compare import exact_errors
from stages.analyze.compare.expected_error import EXCESS_DB
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.link.control_flow import CondRecord
from stages.closed_sets import Precision
from stages.safe_io.json_text import finite_or_name

PASS, FAIL, NOT_EVALUATED = "pass", "fail", "not_evaluated"


class VerdictConfigError(ValueError):
    """analyze.gap_metric or analyze.thresholds do not fit the comparators or the precision."""


@dataclass(frozen=True)
class Verdict:
    status: str
    metric: str
    threshold: float | None
    higher_is_better: bool
    first_divergence: GapRow | None
    diverged_rows: int
    reason: str
    cause: str = ""  # "numeric" (an op's output), "control_flow" (a cond took another branch)
    # dB an op's observed error may exceed its expected error (None: the threshold rule)
    margin: float | None = None


def threshold_for(
    thresholds: Mapping[str, float] | Mapping[Precision, float], precision: str
) -> float:
    """The threshold of a precision (keys are Precision members from a config, or strings)."""
    by_name = {str(key): float(value) for key, value in thresholds.items()}
    if precision not in by_name:
        raise VerdictConfigError(
            f"analyze.thresholds has no entry for precision {precision!r} "
            f"(has {sorted(by_name)}); add analyze.thresholds.{precision}=VALUE"
        )
    return by_name[precision]


def metric_comparator(comparators: list[Comparator], metric: str) -> Comparator:
    for c in comparators:
        if c.name == metric:
            return c
    raise VerdictConfigError(
        f"analyze.gap_metric={metric!r} is not among the comparators "
        f"{[c.name for c in comparators]}; add it to analyze.comparators"
    )


def unjudged(row: GapRow, margin: float | None) -> bool:
    """A float output the expected rule cannot judge: the re-run that gives its expected error
    failed (`expected_fallback`), so only the floor is known and a FAIL against it would blame
    the precision's own error. A non-finite error (a NaN or inf the reference lacks) no
    precision explains, so it is still judged."""
    excess = row.budget.get(EXCESS_DB)
    return (
        margin is not None
        and bool(row.expected_fallback)
        and excess is not None
        and math.isfinite(excess)
    )


def _unjudged_note(rows: Sequence[GapRow], margin: float | None) -> str:
    """What the verdict could not judge and why (empty when it judged every output)."""
    left = [r for r in rows if unjudged(r, margin)]
    if not left:
        return ""
    return (
        f"{len(left)} output(s) not evaluated: their expected error could not be computed "
        f"({left[0].expected_fallback})"
    )


def row_diverged(
    row: GapRow,
    metric: str,
    threshold: float,
    higher_is_better: bool,
    margin: float | None = None,
) -> bool:
    """A compared row whose local gap (accumulated if no local) crosses; a shape/dtype mismatch.

    Integer and bool outputs diverge on any mismatch, index outputs on any mismatch that is not
    a tie flip (stages/analyze/compare/exact_compare.py). A float output with an error budget
    diverges when its observed error exceeds the expected one by more than `margin` dB; without
    a margin or a budget, when its gap metric crosses `threshold`; under the expected rule also
    when its error holds a systematic part the precision does not explain, tested across the
    samples (`row.systematic`, gap/sample_stats.py)."""
    if row.status in ("shape_mismatch", "dtype_mismatch", "output_count_mismatch"):
        return True
    if row.status != "ok" or not row.accumulated:
        return False
    if row.comparison != "float":
        return exact_errors(row.local or row.accumulated) > 0
    if margin is not None and EXCESS_DB in row.budget:
        if unjudged(row, margin):
            return False
        return row.systematic or crosses(row.budget[EXCESS_DB], margin, higher_is_better=False)
    value = row.local.get(metric, row.accumulated[metric])
    return crosses(value, threshold, higher_is_better)


def decide(
    rows: list[GapRow],
    comparator: Comparator,
    threshold: float,
    evaluated: bool,
    reason: str = "",
    flows: Sequence[CondRecord] = (),
    margin: float | None = None,
) -> Verdict:
    """Pass, or fail at the first diverged output in graph order; a cond that took another
    branch than the reference fails on its own, and outputs downstream of it are not blamed."""
    metric, better = comparator.name, comparator.higher_is_better
    if not evaluated:
        return Verdict(NOT_EVALUATED, metric, threshold, better, None, 0, reason, margin=margin)
    diverged = [
        r for r in rows if not r.follows_flip and row_diverged(r, metric, threshold, better, margin)
    ]
    first = min(diverged, key=lambda r: (r.topo_index, r.group, r.output_index), default=None)
    flips = "; ".join(f.message() for f in flows if f.flipped_samples)
    unjudged_note = _unjudged_note(rows, margin)
    if first is None and not flips:
        compared = sum(1 for r in rows if r.accumulated)
        if unjudged_note and compared == sum(1 for r in rows if unjudged(r, margin)):
            return Verdict(
                NOT_EVALUATED, metric, threshold, better, None, 0, unjudged_note, "", margin
            )
        done = "; ".join(filter(None, (f"{compared} outputs compared", unjudged_note)))
        return Verdict(PASS, metric, threshold, better, None, 0, done, margin=margin)
    if first is None:
        return Verdict(FAIL, metric, threshold, better, None, 0, flips, "control_flow", margin)
    crossing = (
        f"{len(diverged)} output(s) exceed their expected error by more than {margin:g} dB"
        if margin is not None
        else f"{len(diverged)} output(s) cross the threshold"
    )
    repeated = sum(1 for r in diverged if r.systematic)
    if margin is not None and repeated:
        crossing = (
            f"{len(diverged)} output(s) exceed their expected error by more than {margin:g} dB "
            f"or by an error repeated on every sample ({repeated})"
        )
    reason = "; ".join(filter(None, (crossing, flips, unjudged_note)))
    return Verdict(FAIL, metric, threshold, better, first, len(diverged), reason, "numeric", margin)


def finite(value: Any) -> Any:
    """JSON-safe: non-finite floats become the strings 'inf', '-inf', 'nan'
    (`stages.safe_io.json_text`, the rule every stage file follows)."""
    return finite_or_name(value)
