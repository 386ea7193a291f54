"""inputs=files: real .npy/.npz/.pt files on disk, read in sorted order, batches split, labels
kept, and every bad file refused with its name."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from stages.export.config import InputSpec
from stages.export.inputs.data_paths import matched_files
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.file_source import file_stream

SPECS = [InputSpec(shape=[2, 3])]
LIMIT = 1 << 20


def _samples(path: Path | str, specs: list[InputSpec] = SPECS) -> list:
    return list(file_stream(str(path), specs, LIMIT))


def test_batches_are_split_in_sorted_path_order_with_labels(tmp_path: Path) -> None:
    rows = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    np.savez(tmp_path / "b.npz", x=rows, labels=np.array([7, 8, 9, 10]))
    np.save(tmp_path / "a.npy", -np.ones((4, 3), dtype=np.float32))  # [N*2, 3]: 2 samples
    torch.save({"inputs": torch.zeros(2, 3), "labels": torch.tensor([5, 6])}, tmp_path / "c.pt")
    (tmp_path / "notes.txt").write_text("ignored in a directory")
    samples = _samples(tmp_path)
    assert [s.origin.split("/")[-1] for s in samples] == [
        "a.npy[0]", "a.npy[1]", "b.npz[0]", "b.npz[1]", "b.npz[2]", "b.npz[3]", "c.pt[0]"
    ]  # fmt: skip
    assert torch.equal(samples[3].tensors[0], torch.from_numpy(rows[1]))
    assert [s.label for s in samples[:2]] == [None, None]
    assert [int(s.label) for s in samples[2:6]] == [7, 8, 9, 10]
    assert samples[6].label is not None and samples[6].label.tolist() == [5, 6]  # a row each


def test_a_list_of_sample_tuples_is_read_as_before(tmp_path: Path) -> None:
    written = [(torch.full((2, 3), float(i)),) for i in range(3)]
    torch.save(written, tmp_path / "old.pt")
    samples = _samples(tmp_path / "old.pt")
    assert [float(s.tensors[0][0, 0]) for s in samples] == [0.0, 1.0, 2.0]


def test_a_glob_matches_files_across_directories(tmp_path: Path) -> None:
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "d.npy", np.zeros((1, 2, 3), dtype=np.float32))
    assert [p.parent.name for p in matched_files(str(tmp_path / "*" / "*.npy"))] == ["x", "y"]
    with pytest.raises(InputsConfigError, match="matches no file; the dataset is empty"):
        matched_files(str(tmp_path / "*.npz"))
    with pytest.raises(InputsConfigError, match="no such file, directory or glob"):
        matched_files(str(tmp_path / "missing.npy"))


def test_pickled_code_is_refused_naming_the_file(tmp_path: Path) -> None:
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(InputsConfigError, match=r"raw\.pt is a raw pickle"):
        _samples(raw)
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputsConfigError, match=r"objects\.npy holds pickled objects"):
        _samples(objects)
    code = tmp_path / "code.pt"
    torch.save({"inputs": torch.zeros(2, 3), "hook": InputSpec(shape=[1])}, code)
    with pytest.raises(InputsConfigError, match=r"code\.pt is not a weights-only tensor file"):
        _samples(code)


def test_files_without_usable_tensors_are_named(tmp_path: Path) -> None:
    torch.save({"weights": torch.zeros(1)}, tmp_path / "dict.pt")
    with pytest.raises(InputsConfigError, match=r"dict\.pt holds no tensors to use"):
        _samples(tmp_path / "dict.pt")
    np.save(tmp_path / "odd.npy", np.zeros((5, 3), dtype=np.float32))  # 5 rows: not batches of 2
    with pytest.raises(InputsConfigError, match=r"odd\.npy array 0 has shape \[5, 3\]"):
        _samples(tmp_path / "odd.npy")
    np.savez(tmp_path / "short.npz", x=np.zeros((2, 2, 3), dtype=np.float32), labels=[1, 2, 3])
    with pytest.raises(InputsConfigError, match=r"short\.npz: 'labels' has shape \[3\]"):
        _samples(tmp_path / "short.npz")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(InputsConfigError, match=r"text\.pt is neither \.npy, \.npz nor"):
        _samples(tmp_path / "text.pt")


def test_a_file_over_the_bound_is_refused_unread(tmp_path: Path) -> None:
    np.save(tmp_path / "big.npy", np.zeros((64, 2, 3), dtype=np.float32))
    with pytest.raises(
        InputsConfigError, match=r"big\.npy is 1,664 bytes, over inputs.max_file_mb \(1,024 bytes\)"
    ):
        list(file_stream(str(tmp_path / "big.npy"), SPECS, 1024))


def test_a_two_input_npz_takes_its_members_in_order(tmp_path: Path) -> None:
    specs = [InputSpec(shape=[1, 4]), InputSpec(shape=[1, 4], dtype="int64")]
    np.savez(tmp_path / "two.npz", x=np.ones((3, 1, 4), np.float32), ids=np.zeros((3, 1, 4)))
    samples = _samples(tmp_path / "two.npz", specs)
    assert len(samples) == 3 and samples[0].tensors[1].dtype == torch.float64  # checked later
    np.savez(tmp_path / "one.npz", x=np.ones((3, 1, 4), np.float32))
    with pytest.raises(InputsConfigError, match=r"holds 1 input array\(s\), model.inputs has 2"):
        _samples(tmp_path / "one.npz", specs)
