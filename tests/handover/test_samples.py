"""Sample files (inputs.pt, reference outputs, run outputs): the later stages of the process
that wrote one take its samples from memory, as copies, only while file and tensors are as
written; anything else is read from the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from stages.formats import samples as samples_module
from stages.handover.samples import load_samples, save_samples


def _written(tmp_path: Path) -> tuple[Path, list[tuple[torch.Tensor, ...]]]:
    samples = [(torch.arange(4.0), torch.ones(2, 3)), (torch.zeros(4), torch.full((2, 3), 7.0))]
    path = tmp_path / "inputs.pt"
    save_samples(samples, path)
    return path, samples


def _refuse_reads(patch: pytest.MonkeyPatch) -> None:
    def refuse(data: bytes, where: str) -> object:
        raise AssertionError(f"{where} was read from disk")

    patch.setattr(samples_module, "load_tensors", refuse)


def _same(a: list[tuple[torch.Tensor, ...]], b: list[tuple[torch.Tensor, ...]]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(s, t) for s, t in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


def test_samples_this_process_wrote_come_from_memory_as_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, samples = _written(tmp_path)
    with monkeypatch.context() as patch:
        _refuse_reads(patch)
        first = load_samples(path)
        second = load_samples(path)  # every later stage gets them
    assert _same(first, samples) and _same(second, samples)
    first[0][0].add_(100.0)  # a copy: neither the kept samples nor the next reader see it
    assert _same(load_samples(path), samples)
    assert _same(load_samples(path), [tuple(t) for t in torch.load(path, weights_only=True)])


def test_samples_written_to_after_saving_are_read_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, samples = _written(tmp_path)
    samples[1][1].mul_(0.0)  # the producer changed what it saved
    loaded = load_samples(path)
    assert torch.equal(loaded[1][1], torch.full((2, 3), 7.0))  # the file's values


def test_a_file_changed_after_writing_is_read_from_disk(tmp_path: Path) -> None:
    path, _ = _written(tmp_path)
    torch.save([(torch.tensor([5.0]),)], path)  # another writer, another mtime
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    loaded = load_samples(path)
    assert len(loaded) == 1 and torch.equal(loaded[0][0], torch.tensor([5.0]))
