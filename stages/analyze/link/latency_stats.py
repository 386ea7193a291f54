"""Latency statistics of one event row in bounded memory, whatever the number of iterations.

Up to `exact` samples a row keeps every duration and its statistics are exactly NumPy's (mean,
min, max, `np.percentile`'s linear interpolation): every run of up to that many iterations gets
the numbers it always got. Past it the samples go into a DDSketch (the `ddsketch` library) and are dropped: min,
max and count stay exact, the mean is a running sum, and a percentile is the sketch's, within
`RELATIVE_ACCURACY` of the exact value. A row then holds at most `MAX_BINS` counters per sign.
"""

from __future__ import annotations

import math
from array import array

import numpy as np
from ddsketch import LogCollapsingLowestDenseDDSketch

# The percentile columns of the event table, by name.
PERCENTILES: dict[str, float] = {"p10": 10.0, "p50": 50.0, "p90": 90.0}
# Durations kept exactly per event row before the sketch takes over (`analyze.latency_exact_samples`).
DEFAULT_EXACT_SAMPLES = 1024
# A sketched percentile is within this fraction of the exact one (DDSketch's guarantee): 0.5%,
# finer than run-to-run timing noise; ~140 buckets per doubling of the values' spread.
RELATIVE_ACCURACY = 0.005
# Counters per sign at most (~9 decades at this accuracy); past it the smallest magnitudes are
# folded together (only percentiles among them lose accuracy).
MAX_BINS = 2048


def _sketch() -> LogCollapsingLowestDenseDDSketch:
    """DDSketch (Masson et al., VLDB 2019; DataDog's implementation): counts in logarithmic
    buckets, so the k-th smallest value is known to a relative accuracy whatever the count; at
    most MAX_BINS buckets per sign, the smallest magnitudes folded together past it."""
    return LogCollapsingLowestDenseDDSketch(relative_accuracy=RELATIVE_ACCURACY, bin_limit=MAX_BINS)


def _ranked(sketch: LogCollapsingLowestDenseDDSketch, rank: int) -> float:
    """The approximate k-th smallest value (0-based): the sketch's quantile at rank + 1/2, so
    float rounding of rank / (count - 1) cannot land on the rank below."""
    count = sketch.count
    quantile = 1.0 if count <= 1 else min(1.0, (rank + 0.5) / (count - 1))
    value = sketch.get_quantile_value(quantile)
    return float(value) if value is not None else math.nan


class LatencyStats:
    """Count, exact min/max, and either every sample (up to `exact`) or a sketch of them."""

    __slots__ = ("count", "exact", "high", "low", "samples", "sketch", "total")

    def __init__(self, exact: int = DEFAULT_EXACT_SAMPLES) -> None:
        self.exact = exact
        self.samples: array[float] | None = array("d")
        self.sketch: LogCollapsingLowestDenseDDSketch | None = None
        self.count = 0
        self.total = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        if value < self.low:  # as min() and max(): a NaN never replaces a bound
            self.low = value
        if value > self.high:
            self.high = value
        samples = self.samples
        if samples is not None:
            if len(samples) < self.exact:
                samples.append(value)
                return
            self.sketch = _sketch()
            for kept in samples:
                self.sketch.add(kept)
            self.samples = None
        assert self.sketch is not None
        self.sketch.add(value)

    @property
    def is_exact(self) -> bool:
        return self.samples is not None

    def stat(self, name: str) -> float:
        """avg, min, max or a percentile of PERCENTILES; NaN without samples."""
        if self.count == 0:
            return math.nan
        if self.samples is not None:
            values = np.array(self.samples, dtype=np.float64)
            if name == "avg":
                return float(values.mean())
            if name == "min":
                return float(values.min())
            if name == "max":
                return float(values.max())
            return float(np.percentile(values, PERCENTILES[name]))  # linear, between ranks
        if name == "avg":
            return self.total / self.count
        if name == "min":
            return self.low
        if name == "max":
            return self.high
        return self._sketched_percentile(PERCENTILES[name])

    def stats(self) -> dict[str, float]:
        """Every statistic by name (PERCENTILES' names, then avg, min, max), one pass over the
        samples: the same numbers `stat` gives one at a time."""
        if self.samples is None or self.count == 0:
            return {name: self.stat(name) for name in (*PERCENTILES, "avg", "min", "max")}
        values = np.array(self.samples, dtype=np.float64)
        ranked = np.percentile(values, list(PERCENTILES.values()))
        named = {name: float(v) for name, v in zip(PERCENTILES, ranked, strict=True)}
        return named | {
            "avg": float(values.mean()),
            "min": float(values.min()),
            "max": float(values.max()),
        }

    def _sketched_percentile(self, q: float) -> float:
        """np.percentile's linear interpolation between the two ranks around q, on the sketch's
        order statistics, kept within the exact min and max."""
        assert self.sketch is not None
        position = q / 100.0 * (self.count - 1)
        below = math.floor(position)
        above = min(below + 1, self.count - 1)
        low, high = _ranked(self.sketch, below), _ranked(self.sketch, above)
        value = low + (high - low) * (position - below)
        return min(max(value, self.low), self.high)

    def state_size(self) -> int:
        """How many numbers the row holds: samples, or sketch counters (bounded either way)."""
        if self.samples is not None:
            return len(self.samples)
        if self.sketch is None:
            return 0
        stores = (self.sketch._store, self.sketch._negative_store)  # dense: the buckets' span
        return sum(store.length() for store in stores) + (1 if self.sketch._zero_count else 0)
