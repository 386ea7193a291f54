"""A file opened for writing that knows the sha256 of what it holds, without reading it back.

zipfile writes each member's header, its data, then seeks back to rewrite the header with the
sizes and CRC. This writer keeps the written chunks in file order (bytes by reference, not
copied), lets a rewrite replace a chunk of the same offset and length, and hashes the chunks
once at the end. Any other kind of write makes `sha256()` hash the file from disk instead.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from types import TracebackType


class DigestingFile:
    """A binary file at `path`, written sequentially (plus same-size rewrites), and its sha256."""

    def __init__(self, path: Path) -> None:
        self.name = str(path)
        self._file = open(path, "wb")  # noqa: SIM115 (a file object is this class's job)
        self._chunks: list[bytes] = []
        self._starts: dict[int, int] = {}  # chunk offset -> index in _chunks
        self._pos = self._end = 0
        self._exact = True

    def __enter__(self) -> DigestingFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._pos = self._file.seek(offset, whence)
        return self._pos

    def write(self, data: bytes | bytearray | memoryview) -> int:
        chunk = data if isinstance(data, bytes) else bytes(data)
        if self._pos == self._end:
            self._starts[self._pos] = len(self._chunks)
            self._chunks.append(chunk)
            self._end += len(chunk)
        else:
            index = self._starts.get(self._pos)
            if index is None or len(self._chunks[index]) != len(chunk):
                self._exact = False
            else:
                self._chunks[index] = chunk
        self._file.write(chunk)
        self._pos += len(chunk)
        return len(chunk)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def sha256(self) -> str:
        """Hex sha256 of everything written (call after the last write)."""
        digest = hashlib.sha256()
        if self._exact:
            for chunk in self._chunks:
                digest.update(chunk)
            return digest.hexdigest()
        self._file.flush()
        with open(self.name, "rb") as written:
            for block in iter(lambda: written.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
