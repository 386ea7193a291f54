"""Write a file so readers never see half of it: into a temp file beside it, then rename.

Every file written here has its sha256 kept (`file_digests.record_written`: the bytes are hashed
as they are written, declared by the writer, or read back once from the temp file), so the stage
cache and the next stage never read it again just to hash it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from stages.safe_io.file_digests import record_written, sha256_of_new_file

# Digests writers computed as they wrote (stages.safe_io.digesting_file), by temp path.
_declared: dict[Path, str] = {}


def declare_digest(tmp: Path, sha256: str) -> None:
    """Tell `atomic_path` the sha256 of what was written to `tmp` (it need not read it back)."""
    _declared[Path(tmp)] = sha256


def _written_digest(tmp: Path) -> tuple[os.stat_result, str] | None:
    declared = _declared.pop(tmp, None)
    if declared is None:
        return sha256_of_new_file(tmp)
    return os.stat(tmp), declared


def _temp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path to write; it replaces `path` on success and is removed on failure."""
    path = Path(path)
    tmp = _temp_beside(path)
    try:
        yield tmp
        written = _written_digest(tmp)
        os.replace(tmp, path)  # the same inode and mtime: the status is the key of `path` now
    finally:
        _declared.pop(tmp, None)
        tmp.unlink(missing_ok=True)
    if written is not None:
        record_written(*written)


def write_text_atomic(path: Path, text: str) -> None:
    """`path` holds `text` (UTF-8), or is left as it was."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`path` holds `data`, or is left as it was."""
    path = Path(path)
    tmp = _temp_beside(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        status = os.stat(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    record_written(status, hashlib.sha256(data).hexdigest())
