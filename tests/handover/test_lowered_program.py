"""The lowered program the lower stage just saved is handed to the next load of that exact file
from memory, once, and equals what reading the file gives; anything else reads the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig

import stages.formats.program as program_format
from stages.formats.program import Program, ProgramError
from stages.handover import lowered_program as program_handover
from stages.handover.lowered_program import load_program
from stages.lower.stage import LowerArtifacts
from stages.safe_io.atomic_write import write_bytes_atomic
from tests.helpers.lowering import export_and_lower


@pytest.fixture
def lowered(tiny_cfg: Callable[..., DictConfig], tmp_path: Path) -> LowerArtifacts:
    program_handover.forget_saved()
    _, artifacts = export_and_lower(tiny_cfg("vit", "backend=xnnpack"), tmp_path / "run")
    return artifacts


@pytest.fixture
def file_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every lowered program file opened for reading."""
    opened: list[str] = []
    real = program_format.BoundedZip

    def counted(source: Path, what: str) -> object:
        opened.append(what)
        return real(source, what)

    monkeypatch.setattr(program_format, "BoundedZip", counted)
    return opened


def _same(a: Program, b: Program) -> None:
    assert repr(a.main) == repr(b.main)  # value references compare by id in their repr
    assert (a.constants, a.metadata) == (b.constants, b.metadata)
    assert a.delegate_blobs == b.delegate_blobs
    assert a.constant_tensors.keys() == b.constant_tensors.keys()
    for name, tensor in a.constant_tensors.items():
        other = b.constant_tensors[name]
        assert (tensor.dtype, tensor.shape, tensor.stride()) == (
            other.dtype,
            other.shape,
            other.stride(),
        )
        assert torch.equal(tensor, other)


def test_the_saved_program_comes_from_memory_once_and_equals_the_file(
    lowered: LowerArtifacts, file_reads: list[str]
) -> None:
    handed = load_program(lowered.program)
    assert file_reads == []
    assert any(name.startswith("delegates/") for name in handed.delegate_blobs)

    from_file = load_program(lowered.program)  # handed over once: now the file
    assert file_reads == [str(lowered.program)]
    _same(handed, from_file)


def test_a_replaced_exported_program_is_refused_as_a_file_load_refuses_it(
    lowered: LowerArtifacts, file_reads: list[str]
) -> None:
    beside = lowered.program.parent / "exported.pt2"
    data = beside.read_bytes()
    write_bytes_atomic(beside, data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ProgramError, match=r"lowered from another exported\.pt2"):
        load_program(lowered.program)
    assert file_reads == [str(lowered.program)]


def test_a_constant_written_to_after_saving_is_read_from_the_file(
    lowered: LowerArtifacts, file_reads: list[str]
) -> None:
    saved = program_handover._saved.get(lowered.program)
    assert saved is not None
    name, tensor = next(iter(saved.constant_tensors.items()))
    original = tensor.detach().clone()
    with torch.no_grad():
        tensor.detach().add_(1.0)
    try:
        loaded = load_program(lowered.program)
    finally:
        with torch.no_grad():
            tensor.detach().copy_(original)
    assert file_reads == [str(lowered.program)]
    assert torch.equal(loaded.constant_tensors[name], original)


def test_a_rewritten_program_file_is_read_from_disk(
    lowered: LowerArtifacts, file_reads: list[str], tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere.zip"
    write_bytes_atomic(other, lowered.program.read_bytes())  # same bytes, another file
    write_bytes_atomic(lowered.program, other.read_bytes()[:-22])  # truncated in its place
    with pytest.raises(ProgramError, match="corrupt"):
        load_program(lowered.program)
    assert file_reads == [str(lowered.program)]
