"""The run's verdict rule as numbers: the margin an op's error may exceed its expected error by,
and the floor (in steps of the precision's resolution) below which error is never blamed."""

from __future__ import annotations

from dataclasses import dataclass

from stages.analyze.compare.expected_error import per_precision
from stages.analyze.config import AnalyzeConfig, VerdictRule


@dataclass(frozen=True)
class VerdictBudget:
    """margin None: the threshold rule (`analyze.verdict_rule=threshold`)."""

    margin: float | None
    floor_units: float


def verdict_budget(cfg: AnalyzeConfig, precision: str) -> VerdictBudget:
    """The margin and floor of `precision` from analyze.margins / analyze.floor_units."""
    floor = per_precision(dict(cfg.floor_units), precision, "analyze.floor_units")
    if cfg.verdict_rule == VerdictRule.threshold:
        return VerdictBudget(None, floor)
    return VerdictBudget(per_precision(dict(cfg.margins), precision, "analyze.margins"), floor)
