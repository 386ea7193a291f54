"""The labels file (labels.pt / analyze.labels): inputs.pt's format, weights-only, bounded; a
file that is not labels is refused naming the option."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from stages.analyze.load import labels as labels_module
from stages.analyze.load.labels import LabelsFileError, read_labels
from stages.formats.samples import write_samples


def test_labels_read_back_one_tensor_per_sample(tmp_path: Path) -> None:
    path = tmp_path / "labels.pt"
    write_samples([(torch.tensor([3, 1]),), (torch.tensor([0, 9]),)], path)
    read = read_labels(path)
    assert [t.tolist() for t in read] == [[3, 1], [0, 9]]


def test_hostile_missing_and_oversized_files_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(LabelsFileError, match="no such file"):
        read_labels(tmp_path / "absent.pt")
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(LabelsFileError, match="raw pickle"):
        read_labels(raw)
    empty = tmp_path / "empty.pt"
    torch.save([], empty)
    with pytest.raises(LabelsFileError, match="non-empty list"):
        read_labels(empty)
    strings = tmp_path / "strings.pt"
    torch.save([("cat",)], strings)
    with pytest.raises(LabelsFileError, match="sample 0 is a tuple"):
        read_labels(strings)
    monkeypatch.setattr(labels_module, "MAX_LABELS_BYTES", 16)
    with pytest.raises(LabelsFileError, match="over the"):
        read_labels(strings)
