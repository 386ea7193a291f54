"""Tap points ExecuTorch will not lower (XNNPACK refusing a partition that returns one value
twice, say): found by bisection over the points and left out, so one untappable value does not
cost every other op its row. Each culprit costs about log2(points) extra lowerings, and only a
program that failed to lower pays them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stages.lower.executorch.tap_points import TapPoint

# Culprits searched for before giving up with the lowering's own error.
MAX_LEFT_OUT = 4


class TapLoweringError(Exception):
    """The instrumented program did not lower (the caller's message says what to do)."""


@dataclass
class TapSearch:
    """The lowering that succeeded, the points it taps, those left out, lowerings tried."""

    lowered: Any
    points: list[TapPoint]
    left_out: list[TapPoint]
    lowerings: int


def lowered_leaving_out_refused(
    points: list[TapPoint], attempt: Callable[[list[TapPoint]], Any]
) -> TapSearch:
    """`attempt(points)` (which raises TapLoweringError when ExecuTorch refuses), retried
    without each point found to make it fail: the last point of the shortest failing prefix
    (the program with no taps is the shipped one, which lowers)."""
    kept, tries = list(points), 0
    left_out: list[TapPoint] = []
    while True:
        tries += 1
        try:
            return TapSearch(attempt(kept), kept, left_out, tries)
        except TapLoweringError:
            if len(left_out) >= MAX_LEFT_OUT or not kept:
                raise
        lowers, fails = 0, len(kept)  # kept[:lowers] lowers, kept[:fails] does not
        while fails - lowers > 1:
            middle = (lowers + fails) // 2
            tries += 1
            try:
                attempt(kept[:middle])
                lowers = middle
            except TapLoweringError:
                fails = middle
        left_out.append(kept.pop(fails - 1))
