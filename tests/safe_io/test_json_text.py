"""Every stage file is strict JSON: a non-finite float at any depth is written by name."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stages.safe_io.json_text import json_text, write_json_atomic
from tests.helpers.strict_json import strict_json


def test_non_finite_floats_at_any_depth_are_named_and_read_back(tmp_path: Path) -> None:
    record = {
        "final_outputs": {"min_snr_db": math.nan, "rows": [1.5, (math.inf, -math.inf)]},
        "plain": 2.0,
    }
    path = tmp_path / "instrumentation.json"
    write_json_atomic(path, record, indent=1)
    read = strict_json(path.read_text())
    assert read == {
        "final_outputs": {"min_snr_db": "nan", "rows": [1.5, ["inf", "-inf"]]},
        "plain": 2.0,
    }
    assert math.isnan(float(read["final_outputs"]["min_snr_db"]))


def test_a_default_that_makes_a_non_finite_float_is_named_too() -> None:
    class Odd:
        pass

    assert strict_json(json_text({"x": Odd()}, default=lambda _: math.nan)) == {"x": "nan"}
    with pytest.raises(TypeError):
        json_text({"x": Odd()})
