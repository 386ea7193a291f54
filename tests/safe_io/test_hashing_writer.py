"""HashingWriter: the digest of what a file holds, taken while writing, whatever the writer does."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

from stages.safe_io.hashing_writer import HashingWriter, file_sha256


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sequential_writes_are_hashed_on_the_way(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    with path.open("wb") as fh:
        writer = HashingWriter(fh)
        writer.write(b"abc")
        writer.write(memoryview(b"0123456789")[2:6])
        writer.write(bytearray(b"xyz"))
        digest, size = writer.sha256(), writer.size
    assert path.read_bytes() == b"abc2345xyz"
    assert (digest, size) == (_sha(path), 10)


def test_a_patched_header_is_hashed_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    with path.open("wb") as fh:
        writer = HashingWriter(fh)
        writer.write(b"\0\0\0\0payload")
        writer.seek(0)
        writer.write(b"HEAD")
        writer.seek(0, io.SEEK_END)
        writer.write(b"tail")
        digest = writer.sha256()
    assert path.read_bytes() == b"HEADpayloadtail"
    assert digest == _sha(path) == file_sha256(path)


def test_zipfile_through_it_gets_the_file_digest(tmp_path: Path) -> None:
    path = tmp_path / "a.zip"
    with path.open("wb") as fh:
        writer = HashingWriter(fh)
        with zipfile.ZipFile(writer, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr("a", b"x" * 10_000)
            with archive.open("b", "w") as member:  # streamed member: header patched afterwards
                member.write(b"y" * 5_000)
        digest, size = writer.sha256(), writer.size
    assert (digest, size) == (_sha(path), path.stat().st_size)
    assert zipfile.ZipFile(path).read("b") == b"y" * 5_000
