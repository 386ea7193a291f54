"""A file written through DigestingFile knows its own sha256 without reading itself back."""

from __future__ import annotations

import hashlib
import random
import zipfile
from pathlib import Path

import pytest

from stages.safe_io.digesting_file import DigestingFile


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("allow_zip64", [True, False])
def test_a_zip_written_through_it_has_the_digest_of_its_bytes(
    tmp_path: Path, allow_zip64: bool
) -> None:
    rng = random.Random(0)
    path = tmp_path / "archive.zip"
    with DigestingFile(path) as file:
        with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=allow_zip64) as archive:
            archive.writestr("program.json", "{}")
            archive.writestr("delegates/0.bin", rng.randbytes(300_000))
            archive.writestr("empty", b"")
            archive.writestr("view", memoryview(bytearray(rng.randbytes(5000))))
        written = path.read_bytes()
        path.unlink()  # the digest comes from what was written, not from reading the file back
        digest = file.sha256()
    assert digest == hashlib.sha256(written).hexdigest()
    path.write_bytes(written)
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None and len(archive.namelist()) == 4


def test_writes_it_cannot_follow_are_hashed_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "patched.bin"
    with DigestingFile(path) as file:
        file.write(b"a" * 100)
        file.write(b"b" * 100)
        file.seek(50)
        file.write(b"c" * 100)  # straddles two earlier writes
        file.seek(0, 2)
        file.write(bytearray(b"tail"))
        digest = file.sha256()
    assert path.read_bytes() == b"a" * 50 + b"c" * 100 + b"b" * 50 + b"tail"
    assert digest == _sha256(path)


def test_a_same_size_rewrite_replaces_the_earlier_chunk(tmp_path: Path) -> None:
    path = tmp_path / "rewritten.bin"
    with DigestingFile(path) as file:
        file.write(b"header--")
        file.write(b"payload")
        file.seek(0)
        file.write(b"HEADER!!")
        file.seek(0, 2)
        file.write(b"end")
        digest = file.sha256()
    assert path.read_bytes() == b"HEADER!!payloadend"
    assert digest == _sha256(path)
