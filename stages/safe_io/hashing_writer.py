"""A binary file written front to back that hashes its bytes as they pass, never holding them.

`torch.export.save` streams a multi-gigabyte archive through `write`; hashing on the way saves
building the archive in memory and reading the file back to fingerprint it. A write anywhere
but the end (a writer that seeks back to patch a header) makes `sha256()` hash the file from
disk instead, so the digest is always the file's.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import BinaryIO


class HashingWriter(io.RawIOBase):
    """Write-through wrapper of an open binary file, with the sha256 and size of what it holds."""

    def __init__(self, file: BinaryIO) -> None:
        super().__init__()
        self._file = file
        self._digest = hashlib.sha256()
        self._pos = self._end = file.tell()
        self._sequential = self._pos == 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = self._file.seek(offset, whence)
        return self._pos

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(data).cast("B")
        if self._pos == self._end:
            self._digest.update(view)
        else:
            self._sequential = False  # a patch: hash the file itself at the end
        written = self._file.write(view)
        self._pos += written
        self._end = max(self._end, self._pos)
        return written

    def flush(self) -> None:
        if not self._file.closed:  # at garbage collection the file may be closed already
            self._file.flush()

    @property
    def size(self) -> int:
        """Bytes the file holds."""
        return self._end

    def sha256(self) -> str:
        """Hex sha256 of the file's bytes (after the last write)."""
        if self._sequential:
            return self._digest.hexdigest()
        self._file.flush()
        return file_sha256(Path(self._file.name))


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
