"""stages.percentiles: the one percentile behind every p10..p90 (run metrics, event tables)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.percentiles import percentile

_values = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50)


@given(_values, st.sampled_from([10.0, 50.0, 90.0, 0.0, 100.0, 37.5]))
def test_percentile_is_numpys_linear_percentile(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), abs=1e-6)


def test_p90_of_ten_values_interpolates_between_ranks() -> None:
    assert percentile([float(v) for v in range(1, 11)], 90.0) == pytest.approx(9.1)
    assert percentile([4.0], 90.0) == 4.0


@pytest.mark.parametrize(("values", "q"), [([], 50.0), ([1.0], 101.0)])
def test_percentile_refuses_what_it_cannot_compute(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, q)
