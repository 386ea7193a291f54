"""How many samples calibrate and how many are judged, when the data hold fewer than asked."""

from __future__ import annotations

import pytest

from stages.export.config import InputsConfig, InputsSource
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.split_counts import counts_for, effective_source, wanted_counts

FILES = InputsSource.files


def test_defaults_per_source() -> None:
    assert (
        wanted_counts(InputsConfig()).calibration,
        wanted_counts(InputsConfig()).evaluation,
    ) == (0, 1)
    random = wanted_counts(InputsConfig(count=4, calibration=8))
    assert (random.calibration, random.evaluation) == (8, 4)
    files = wanted_counts(InputsConfig(FILES, path="d"))
    assert (files.calibration, files.evaluation) == (32, 16)
    assert effective_source(InputsConfig(path="old.pt")) == FILES  # the older inputs.path form


@pytest.mark.parametrize(
    ("options", "held", "split"),
    [
        ({}, 30, (20, 10)),
        ({}, 2, (1, 1)),
        ({}, 1, (0, 1)),  # one sample: calibrate on it, and say so
        ({"evaluation": 5}, 12, (7, 5)),
        ({"evaluation": 5}, 5, (0, 5)),
        ({"calibration": 10}, 12, (10, 2)),
        ({"calibration": 0}, 7, (0, 7)),
    ],
)
def test_defaults_shrink_to_the_data(options: dict, held: int, split: tuple[int, int]) -> None:
    counts = counts_for(InputsConfig(FILES, path="d", **options), held, "inputs.path=d")
    assert (counts.calibration, counts.evaluation) == split
    assert f"inputs.path=d yields {held} samples, fewer than" in counts.note


@pytest.mark.parametrize(
    ("options", "held", "message"),
    [
        ({"calibration": 4, "evaluation": 4}, 7, "ask for 8 samples; inputs.path=d yields only 7"),
        ({"evaluation": 9}, 7, "ask for 41 samples"),
        ({"calibration": 7}, 7, "inputs.calibration=7 leaves no evaluation sample"),
        ({}, 0, "yields no samples; the dataset is empty"),
        ({"evaluation": 0}, 3, r"inputs.evaluation=0: give 1 or more"),
        ({"calibration": -1}, 3, r"inputs.calibration=-1: give 0 or more"),
    ],
)
def test_explicit_counts_that_do_not_fit_are_refused(
    options: dict, held: int, message: str
) -> None:
    with pytest.raises(InputsConfigError, match=message):
        counts_for(InputsConfig(FILES, path="d", **options), held, "inputs.path=d")
