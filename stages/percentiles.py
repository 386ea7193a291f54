"""One percentile function for every p10..p90 the project reports (run metrics, event tables)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# The percentile columns of the event table, by name.
PERCENTILES: dict[str, float] = {"p10": 10.0, "p50": 50.0, "p90": 90.0}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolating linearly between ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q={q} is outside 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
