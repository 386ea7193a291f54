"""Latency statistics of one event row in bounded memory, whatever the number of iterations.

Up to `exact` samples a row keeps every duration and its statistics are exactly NumPy's (mean,
min, max, `np.percentile`'s linear interpolation): every run of up to that many iterations gets
the numbers it always got. Past it the samples go into a `QuantileSketch` and are dropped: min,
max and count stay exact, the mean is a running sum, and a percentile is the sketch's, within
`RELATIVE_ACCURACY` of the exact value. A row then holds at most `MAX_BINS` counters per sign.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable

import numpy as np

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


class QuantileSketch:
    """A DDSketch (Masson et al., VLDB 2019): counts in logarithmic buckets, so the k-th smallest
    value is known to a relative accuracy whatever the count; memory grows with the spread of
    the values (log of max/min), not with how many there are."""

    def __init__(self, relative_accuracy: float = RELATIVE_ACCURACY) -> None:
        self.gamma = (1 + relative_accuracy) / (1 - relative_accuracy)
        self._log_gamma = math.log(self.gamma)
        self.positive: dict[int, int] = {}
        self.negative: dict[int, int] = {}  # by the bucket of -value
        self.zeros = 0
        self.count = 0

    def add(self, value: float) -> None:
        self.count += 1
        if value == 0.0:
            self.zeros += 1
            return
        store = self.positive if value > 0 else self.negative
        key = math.ceil(math.log(abs(value)) / self._log_gamma)
        store[key] = store.get(key, 0) + 1
        if len(store) > MAX_BINS:
            _fold_smallest(store)

    def _value(self, key: int) -> float:
        return 2.0 * self.gamma**key / (self.gamma + 1.0)

    def _ordered(self) -> Iterable[tuple[float, int]]:
        """(bucket value, count) from the smallest value to the largest."""
        for key in sorted(self.negative, reverse=True):
            yield -self._value(key), self.negative[key]
        if self.zeros:
            yield 0.0, self.zeros
        for key in sorted(self.positive):
            yield self._value(key), self.positive[key]

    def ranked(self, ranks: list[int]) -> list[float]:
        """The approximate k-th smallest value (0-based) for each of the sorted `ranks`."""
        found: list[float] = []
        seen = 0
        wanted = iter(ranks)
        rank = next(wanted, None)
        for value, count in self._ordered():
            seen += count
            while rank is not None and rank < seen:
                found.append(value)
                rank = next(wanted, None)
        return found

    @property
    def bins(self) -> int:
        return len(self.positive) + len(self.negative) + (1 if self.zeros else 0)


def _fold_smallest(store: dict[int, int]) -> None:
    """Merge the bucket of the smallest magnitude into the next one (DDSketch's collapse)."""
    low, next_low = sorted(store)[:2]
    store[next_low] += store.pop(low)


class LatencyStats:
    """Count, exact min/max, and either every sample (up to `exact`) or a sketch of them."""

    __slots__ = ("count", "exact", "high", "low", "samples", "sketch", "total")

    def __init__(self, exact: int = DEFAULT_EXACT_SAMPLES) -> None:
        self.exact = exact
        self.samples: array[float] | None = array("d")
        self.sketch: QuantileSketch | None = None
        self.count = 0
        self.total = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)
        if self.samples is not None:
            if len(self.samples) < self.exact:
                self.samples.append(value)
                return
            self.sketch = QuantileSketch()
            for kept in self.samples:
                self.sketch.add(kept)
            self.samples = None
        assert self.sketch is not None
        self.sketch.add(value)

    @property
    def is_exact(self) -> bool:
        return self.samples is not None

    def stat(self, name: str) -> float:
        """avg, min, max or a percentile of PERCENTILES; NaN without samples (as NumPy's)."""
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

    def _sketched_percentile(self, q: float) -> float:
        """np.percentile's linear interpolation between the two ranks around q, on the sketch's
        order statistics, kept within the exact min and max."""
        assert self.sketch is not None
        position = q / 100.0 * (self.count - 1)
        below = math.floor(position)
        above = min(below + 1, self.count - 1)
        low, high = self.sketch.ranked([below, above])
        value = low + (high - low) * (position - below)
        return min(max(value, self.low), self.high)

    def state_size(self) -> int:
        """How many numbers the row holds: samples, or sketch counters (bounded either way)."""
        if self.samples is not None:
            return len(self.samples)
        return self.sketch.bins if self.sketch is not None else 0
