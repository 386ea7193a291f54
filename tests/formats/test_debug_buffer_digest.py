"""The run stage writes debug.bin with its sha256 kept from the payload digest it computes
anyway: the stage cache and the analysis fingerprint never read it back just to hash it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from stages.formats.etdump.debug_buffer import DebugBufferWriter
from stages.safe_io import atomic_write, file_digests
from stages.safe_io.file_digests import known_sha256


def test_the_debug_buffer_digest_is_kept_as_written_without_reading_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file_digests.forget_all()
    writer = DebugBufferWriter()
    for size in (3, 1000, 17):
        writer.append(torch.randn(size))

    def no_read_back(path: Path) -> None:
        raise AssertionError(f"{path} read back to be hashed")

    monkeypatch.setattr(atomic_write, "sha256_of_new_file", no_read_back)
    writer.write(tmp_path / "debug.bin", "ab" * 32)
    monkeypatch.undo()
    data = (tmp_path / "debug.bin").read_bytes()
    assert known_sha256(tmp_path / "debug.bin") == hashlib.sha256(data).hexdigest()
