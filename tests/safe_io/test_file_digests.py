"""A file is hashed at most once per process, and a changed file never gets a stale digest."""

from __future__ import annotations

import hashlib
import os
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.cache.hard_links import link_or_copy
from stages.safe_io import file_digests
from stages.safe_io.atomic_write import atomic_path, write_bytes_atomic, write_text_atomic
from stages.safe_io.file_digests import file_sha256, known_sha256, read_with_sha256


@pytest.fixture(autouse=True)
def _fresh_digests() -> Iterator[None]:
    file_digests.forget_all()
    yield
    file_digests.forget_all()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _written_long_ago(path: Path, data: bytes) -> None:
    """A file as exported.pt2 is when a later stage reads it: its mtime well in the past."""
    path.write_bytes(data)
    past = time.time_ns() - 60 * 10**9
    os.utime(path, ns=(past, past))


def test_atomic_writes_keep_the_digest_of_what_they_wrote(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)
    write_bytes_atomic(tmp_path / "exported.pt2", data)
    write_text_atomic(tmp_path / "lowering.json", '{"a": 1}')
    with atomic_path(tmp_path / "program.zip") as tmp, zipfile.ZipFile(tmp, "w") as archive:
        archive.writestr("program.json", "{}")

    assert known_sha256(tmp_path / "exported.pt2") == _sha(data)
    assert known_sha256(tmp_path / "lowering.json") == _sha(b'{"a": 1}')
    assert known_sha256(tmp_path / "program.zip") == _sha((tmp_path / "program.zip").read_bytes())


def test_a_settled_file_is_hashed_once_and_its_hard_links_share_the_digest(tmp_path: Path) -> None:
    path = tmp_path / "debug.bin"
    _written_long_ago(path, b"tensor bytes" * 1000)
    assert known_sha256(path) is None
    digest = file_sha256(path)
    assert digest == _sha(path.read_bytes())
    assert known_sha256(path) == digest

    link_or_copy(path, tmp_path / "cache" / "debug.bin")  # what the stage cache does
    assert known_sha256(tmp_path / "cache" / "debug.bin") == digest
    assert read_with_sha256(tmp_path / "cache" / "debug.bin") == (path.read_bytes(), digest)


def test_a_file_rewritten_atomically_with_the_same_size_gets_its_new_digest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "exported.pt2"
    write_bytes_atomic(path, b"A" * 4096)
    first = file_sha256(path)
    write_bytes_atomic(path, b"B" * 4096)  # a new inode
    assert file_sha256(path) == _sha(b"B" * 4096) != first


def test_a_file_rewritten_in_place_with_the_same_size_gets_its_new_digest(tmp_path: Path) -> None:
    path = tmp_path / "inputs.pt"
    _written_long_ago(path, b"A" * 4096)
    assert file_sha256(path) == _sha(b"A" * 4096)
    with path.open("r+b") as fh:  # same inode, same size: only the mtime moves
        fh.write(b"C" * 4096)
    assert file_sha256(path) == _sha(b"C" * 4096)
    assert read_with_sha256(path) == (b"C" * 4096, _sha(b"C" * 4096))


def test_a_digest_read_from_a_file_just_modified_is_not_kept(tmp_path: Path) -> None:
    """Within a timestamp tick of its last write, a file can change again with the same mtime."""
    path = tmp_path / "etdump.etdp"
    path.write_bytes(b"fresh")  # by another writer: no digest recorded
    assert file_sha256(path) == _sha(b"fresh")
    assert known_sha256(path) is None

    whole_second = (time.time_ns() // 10**9) * 10**9  # a file system with 1 s timestamps
    os.utime(path, ns=(whole_second, whole_second))
    file_sha256(path)
    assert known_sha256(path) is None
    os.utime(path, ns=(whole_second - 5 * 10**9,) * 2)
    file_sha256(path)
    assert known_sha256(path) == _sha(b"fresh")


def test_only_the_most_recent_digests_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_digests, "MAX_KEPT", 2)
    for name in ("a", "b", "c"):
        write_bytes_atomic(tmp_path / name, name.encode())
    assert known_sha256(tmp_path / "a") is None
    assert known_sha256(tmp_path / "c") == _sha(b"c")


def test_a_missing_file_is_an_os_error_and_is_known_to_nobody(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "absent")
    assert known_sha256(tmp_path / "absent") is None
