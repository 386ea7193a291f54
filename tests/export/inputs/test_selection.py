"""Which samples a run takes: random keeps today's samples (and says int8 calibrates on them),
real data split into calibration first, then evaluation; labels all or none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from stages.export.config import InputsConfig, InputSpec, InputsSource
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.random_source import generate_inputs
from stages.export.inputs.selection import select_inputs

SPECS = [InputSpec(shape=[1, 4])]


def test_random_by_default_is_the_seeded_samples_calibrated_on_themselves(tmp_path: Path) -> None:
    selected = select_inputs(SPECS, InputsConfig(count=3, seed=5), tmp_path)
    expected = generate_inputs(SPECS, 3, 5)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(selected.evaluation, expected, strict=True))
    assert selected.calibration == [] and selected.labels is None
    record = selected.record
    assert record["calibrated_on_evaluation"] is True and record["overlap"] is True
    assert (
        record["calibration"]
        == record["evaluation"]
        == {
            "count": 3,
            "indices": [0, 3],
            "first": "random sample 0 (seed 5)",
            "last": "random sample 2 (seed 5)",
        }
    )


def test_random_calibration_draws_others_after_the_evaluation_samples(tmp_path: Path) -> None:
    selected = select_inputs(SPECS, InputsConfig(count=2, calibration=3), tmp_path)
    stream = generate_inputs(SPECS, 5, 0)
    assert all(
        torch.equal(a[0], b[0]) for a, b in zip(selected.evaluation, stream[:2], strict=True)
    )
    assert all(
        torch.equal(a[0], b[0]) for a, b in zip(selected.calibration, stream[2:], strict=True)
    )
    assert selected.record["calibration"]["indices"] == [2, 5]
    assert selected.record["calibrated_on_evaluation"] is False


def test_files_split_first_calibration_then_evaluation(tmp_path: Path) -> None:
    values = np.arange(10, dtype=np.float32)[:, None, None] * np.ones((1, 1, 4), np.float32)
    np.savez(tmp_path / "d.npz", x=values, labels=np.arange(10) + 100)
    cfg = InputsConfig(InputsSource.files, path=str(tmp_path), calibration=6, evaluation=3)
    selected = select_inputs(SPECS, cfg, tmp_path)
    assert [float(s[0][0, 0]) for s in selected.calibration] == [0, 1, 2, 3, 4, 5]
    assert [float(s[0][0, 0]) for s in selected.evaluation] == [6, 7, 8]
    assert selected.labels is not None and [int(t) for t in selected.labels] == [106, 107, 108]
    defaults = select_inputs(SPECS, InputsConfig(InputsSource.files, path=str(tmp_path)), tmp_path)
    assert (len(defaults.calibration), len(defaults.evaluation)) == (7, 3)  # 10 < 32 + 16
    assert "yields 10 samples, fewer than" in defaults.record["notes"][0]


def test_labels_on_some_evaluation_samples_only_are_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.zeros((2, 1, 4), np.float32), labels=[1, 2])
    np.save(tmp_path / "b.npy", np.zeros((2, 1, 4), np.float32))
    cfg = InputsConfig(InputsSource.files, path=str(tmp_path), calibration=0, evaluation=4)
    with pytest.raises(InputsConfigError, match=r"sample 2 \(.*b\.npy\[0\]\) has no label"):
        select_inputs(SPECS, cfg, tmp_path)
