"""Tap points ExecuTorch will not lower are found by bisection and left out; the rest lower."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stages.lower.executorch.tap_points import TapPoint
from stages.lower.executorch.tap_search import (
    MAX_LEFT_OUT,
    TapLoweringError,
    lowered_leaving_out_refused,
)


def _points(count: int) -> list[TapPoint]:
    return [TapPoint(f"op_{i}", (f"op_{i}",), (i,), 0, "torch.float32", (1,)) for i in range(count)]


def _lowering(refused: set[str], calls: list[int]) -> Callable[[list[TapPoint]], list[str]]:
    """A lowering that refuses any program tapping one of `refused`."""

    def attempt(chosen: list[TapPoint]) -> list[str]:
        calls.append(len(chosen))
        if refused & {p.source for p in chosen}:
            raise TapLoweringError("Output node is already in the inputs")
        return [p.source for p in chosen]

    return attempt


@pytest.mark.parametrize("refused", [set(), {"op_0"}, {"op_13"}, {"op_25"}, {"op_3", "op_17"}])
def test_the_refused_points_and_only_they_are_left_out(refused: set[str]) -> None:
    calls: list[int] = []
    search = lowered_leaving_out_refused(_points(26), _lowering(refused, calls))
    assert {p.source for p in search.left_out} == refused
    assert search.lowered == [p.source for p in _points(26) if p.source not in refused]
    assert search.lowerings == len(calls)
    # each culprit costs about log2(26) lowerings, not one per point
    assert search.lowerings <= 1 + len(refused) * 6


def test_too_many_refusals_give_the_lowerings_own_error() -> None:
    refused = {f"op_{i}" for i in range(MAX_LEFT_OUT + 1)}
    with pytest.raises(TapLoweringError, match="already in the inputs"):
        lowered_leaving_out_refused(_points(10), _lowering(refused, []))
