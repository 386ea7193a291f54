"""inputs=loader: the forms a loader may yield, its errors named with the item, and items taken
one at a time (a loader is never run past the samples a run needs)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from stages.export.config import InputsConfig, InputSpec, InputsSource
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.loader_source import split_item
from stages.export.inputs.selection import select_inputs
from stages.python_target import file_module_name

SPECS = [InputSpec(shape=[1, 4])]

LOADER = """
import torch

PULLED = []

def labelled(n=1000):
    for i in range(n):
        PULLED.append(i)
        yield (torch.full((1, 4), float(i)),), i % 3

def breaks():
    yield torch.zeros(1, 4)
    raise OSError("disk gone")

def not_iterable():
    return 3
"""


def _loader(tmp_path: Path, name: str, **options: object) -> InputsConfig:
    (tmp_path / "data.py").write_text(LOADER)
    return InputsConfig(InputsSource.loader, _target_=f"{tmp_path / 'data.py'}:{name}", **options)  # type: ignore[arg-type]


def test_the_forms_of_an_item() -> None:
    x, y = torch.zeros(1, 4), torch.ones(1, 4)
    assert split_item(x, 1, 0) == ((x,), None)
    assert split_item((x, y), 2, 0) == ((x, y), None)
    tensors, label = split_item(((x, y), 4), 2, 0)
    assert tensors == (x, y) and label is not None and int(label) == 4
    tensors, label = split_item((x, 2), 1, 0)  # one-input model: (x, label)
    assert tensors == (x,) and label is not None and int(label) == 2
    with pytest.raises(InputsConfigError, match="loader item 5 is a str"):
        split_item("x", 1, 5)


def test_only_the_needed_items_are_pulled_and_split(tmp_path: Path) -> None:
    cfg = _loader(tmp_path, "labelled", calibration=3, evaluation=2)
    selected = select_inputs(SPECS, cfg, tmp_path)
    assert [float(s[0][0, 0]) for s in selected.calibration] == [0.0, 1.0, 2.0]
    assert [float(s[0][0, 0]) for s in selected.evaluation] == [3.0, 4.0]
    assert selected.labels is not None and [int(t) for t in selected.labels] == [0, 1]
    module = sys.modules[file_module_name(tmp_path / "data.py")]
    assert module.PULLED == [0, 1, 2, 3, 4]  # never past what the run needs
    assert selected.record["calibration"]["indices"] == [0, 3]
    assert selected.record["evaluation"]["indices"] == [3, 5]
    assert selected.record["overlap"] is False and selected.record["labels"] is True


def test_a_loader_that_raises_is_named_with_the_item(tmp_path: Path) -> None:
    with pytest.raises(InputsConfigError, match=r"raised at item 1: OSError: disk gone"):
        select_inputs(SPECS, _loader(tmp_path, "breaks"), tmp_path)
    with pytest.raises(InputsConfigError, match="calling it failed: TypeError"):
        select_inputs(SPECS, _loader(tmp_path, "not_iterable"), tmp_path)


READS_A_FILE = """
import numpy as np

def from_disk(path):
    for row in np.load(path):
        yield (row.reshape(1, 4),)
"""


def test_the_samples_digest_follows_the_data_a_loader_reads(tmp_path: Path) -> None:
    from stages.export.inputs.cache_inputs import loader_samples_sha256

    (tmp_path / "disk.py").write_text(READS_A_FILE)
    data = tmp_path / "rows.npy"
    np.save(data, np.zeros((8, 4), np.float32))
    cfg = InputsConfig(
        InputsSource.loader,
        _target_=f"{tmp_path / 'disk.py'}:from_disk",
        kwargs={"path": str(data)},
        calibration=2,
        evaluation=3,
    )  # type: ignore[arg-type]
    first = loader_samples_sha256(SPECS, cfg, tmp_path)
    assert first is not None and first == loader_samples_sha256(SPECS, cfg, tmp_path)
    rows = np.zeros((8, 4), np.float32)
    rows[7] = 1.0  # past the 5 samples the run takes: not part of it
    np.save(data, rows)
    assert loader_samples_sha256(SPECS, cfg, tmp_path) == first
    rows[4] = 1.0  # the last evaluation sample
    np.save(data, rows)
    assert loader_samples_sha256(SPECS, cfg, tmp_path) != first
    broken = _loader(tmp_path, "breaks", calibration=0, evaluation=3)
    assert loader_samples_sha256(SPECS, broken, tmp_path) == "the loader failed"
    random = InputsConfig(InputsSource.random)  # type: ignore[arg-type]
    assert loader_samples_sha256(SPECS, random, tmp_path) is None
