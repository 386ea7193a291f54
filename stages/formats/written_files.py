"""Values this process wrote to files, kept for the later stages of the same invocation: found
by the sha256 the writer declared for the file (`file_digests`), so only that exact file,
unchanged since (same device, inode, size and mtime), gets them; anything else is read from disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Generic, TypeVar

from stages.safe_io.file_digests import known_sha256

T = TypeVar("T")


class WrittenFiles(Generic[T]):
    """The last `capacity` values kept, each under the digest of the file it was written to."""

    def __init__(self, capacity: int = 1) -> None:
        self._capacity = capacity
        self._kept: dict[str, T] = {}

    def keep(self, path: Path, value: T) -> None:
        """Keep `value` for the file just written at `path` (the oldest kept one goes)."""
        digest = known_sha256(Path(path))
        if digest is None:
            return
        self._kept.pop(digest, None)
        self._kept[digest] = value
        while len(self._kept) > self._capacity:
            del self._kept[next(iter(self._kept))]

    def get(self, path: Path) -> T | None:
        """The value kept for this exact, unchanged file, if any (it stays kept)."""
        digest = known_sha256(Path(path))
        return self._kept.get(digest) if digest is not None else None

    def take(self, path: Path) -> T | None:
        """The value kept for this exact, unchanged file, handed over once."""
        digest = known_sha256(Path(path))
        return self._kept.pop(digest, None) if digest is not None else None

    def clear(self) -> None:
        self._kept.clear()
