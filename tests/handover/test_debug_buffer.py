"""The debug buffer the run stage has just written reaches the analysis from memory, once, and
only while the file is the one written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from stages.formats.etdump import DebugBufferError
from stages.formats.etdump import debug_buffer as debug_buffer_module
from stages.formats.etdump.debug_buffer import DebugBufferWriter
from stages.handover.debug_buffer import load_debug_buffer, write_debug_buffer

PROGRAM = "ab" * 32


def _written(tmp_path: Path) -> tuple[Path, DebugBufferWriter]:
    writer = DebugBufferWriter()
    writer.append(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    writer.append(torch.ones(5, dtype=torch.int64))
    path = tmp_path / "debug.bin"
    write_debug_buffer(writer, path, PROGRAM)
    return path, writer


def _no_disk_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> bytearray:
        raise AssertionError(f"{path} was read from disk")

    monkeypatch.setattr(debug_buffer_module, "_read_writable", refuse)


def test_the_buffer_just_written_comes_from_memory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, writer = _written(tmp_path)
    on_disk = path.read_bytes()
    with monkeypatch.context() as patch:
        _no_disk_reads(patch)
        kept = load_debug_buffer(path)
    assert bytes(kept.payload) == on_disk[: writer.size]
    assert kept.program_fingerprint == PROGRAM
    assert kept.payload_sha256 == writer.payload_sha256()
    again = load_debug_buffer(path)  # handed over once: now from disk, verified
    assert bytes(again.payload) == bytes(kept.payload)
    assert again.payload_sha256 == kept.payload_sha256


def test_a_file_changed_after_writing_is_read_and_verified(tmp_path: Path) -> None:
    path, _ = _written(tmp_path)
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(DebugBufferError, match="do not match the sha256"):
        load_debug_buffer(path)


def test_appending_after_a_write_leaves_the_kept_payload_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, writer = _written(tmp_path)
    size = writer.size
    writer.append(torch.zeros(1000))
    assert writer.size > size
    with monkeypatch.context() as patch:
        _no_disk_reads(patch)
        kept = load_debug_buffer(path)
    assert len(kept.payload) == size
    assert bytes(kept.payload) == path.read_bytes()[:size]
