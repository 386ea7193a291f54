"""Per-row latency statistics: exactly NumPy's up to the cap, a sketch within its stated accuracy
past it, and state whose size does not grow with the number of samples."""

from __future__ import annotations

import numpy as np
import pytest

from stages.analyze.link.latency_stats import (
    MAX_BINS,
    PERCENTILES,
    RELATIVE_ACCURACY,
    LatencyStats,
)

STATS = ("p10", "p50", "p90", "avg", "min", "max")


def _filled(values: np.ndarray, exact: int) -> LatencyStats:
    stats = LatencyStats(exact)
    for value in values.tolist():
        stats.add(value)
    return stats


def test_up_to_the_cap_every_statistic_is_numpys_bit_for_bit() -> None:
    values = np.random.default_rng(0).lognormal(0.0, 1.0, 500)
    stats = _filled(values, exact=500)
    assert stats.is_exact and stats.count == 500
    expected = {
        "avg": values.mean(),
        "min": values.min(),
        "max": values.max(),
        **{name: np.percentile(values, q) for name, q in PERCENTILES.items()},
    }
    assert {s: stats.stat(s) for s in STATS} == {s: float(v) for s, v in expected.items()}
    assert stats.stats() == {s: float(v) for s, v in expected.items()}  # all at once, the same


@pytest.mark.parametrize("count", [0, 1, 300])
def test_all_statistics_at_once_are_each_ones_own_past_the_cap_and_empty(count: int) -> None:
    stats = _filled(np.random.default_rng(5).lognormal(0.0, 1.0, count), exact=64)
    together, alone = stats.stats(), {s: stats.stat(s) for s in STATS}
    assert list(together) == list(STATS)
    assert np.allclose(list(together.values()), list(alone.values()), equal_nan=True, rtol=0)


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).lognormal(-3.0, 2.0, 20_000),  # µs to s, skewed
        np.random.default_rng(2).normal(0.0, 1.0, 20_000),  # negatives and positives
        np.concatenate([np.zeros(5_000), np.random.default_rng(3).uniform(1, 2, 5_000)]),
        np.full(10_000, 3.25),
    ],
    ids=["lognormal", "signed", "zeros", "constant"],
)
def test_past_the_cap_percentiles_are_within_the_stated_accuracy(values: np.ndarray) -> None:
    stats = _filled(values, exact=64)
    assert not stats.is_exact
    assert stats.stat("min") == values.min() and stats.stat("max") == values.max()
    assert stats.stat("avg") == pytest.approx(values.mean(), rel=1e-9, abs=1e-12)
    for name, q in PERCENTILES.items():
        exact = float(np.percentile(values, q))
        # DDSketch bounds each order statistic relatively; interpolating two keeps the bound,
        # measured against the larger magnitude of the two neighbouring order statistics.
        ordered = np.sort(values)
        position = q / 100 * (len(values) - 1)
        scale = max(abs(ordered[int(np.floor(position))]), abs(ordered[int(np.ceil(position))]))
        assert abs(stats.stat(name) - exact) <= RELATIVE_ACCURACY * scale + 1e-12, name


def test_state_does_not_grow_with_the_number_of_samples() -> None:
    rng = np.random.default_rng(4)
    sizes = []
    for count in (10_000, 100_000):
        stats = _filled(rng.lognormal(0.0, 0.3, count), exact=256)
        sizes.append(stats.state_size())
    # Same distribution, ten times the samples: the sketch holds as many buckets (give or take
    # the few a wider sample range reaches), never ten times as many.
    assert sizes[1] <= sizes[0] * 1.5
    assert sizes[1] < 1_000


def test_a_sketch_never_holds_more_than_max_bins_per_sign() -> None:
    stats = LatencyStats(exact=16)
    for exponent in np.linspace(-300, 300, 50_000):  # a spread no bucket budget covers
        stats.add(float(10.0**exponent))
        stats.add(-float(10.0**exponent))
    assert stats.count == 100_000 and stats.sketch is not None
    assert stats.state_size() <= 2 * MAX_BINS
    # The largest values keep their accuracy: only the smallest magnitudes were folded.
    top = stats.sketch.get_quantile_value(1.0)
    assert top == pytest.approx(1e300, rel=RELATIVE_ACCURACY)
