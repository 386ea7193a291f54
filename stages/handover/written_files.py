"""Values this process wrote to (or read from) files, kept for the later stages of the same
invocation: found by the sha256 the writer declared for the file (`file_digests`), so only that
exact file, unchanged since (same device, inode, size and mtime), gets them; anything else is
read from disk. The one mechanism of every handover in this package.
"""

from __future__ import annotations

from collections.abc import Iterator
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
        if digest is not None:
            self.keep_digest(digest, value)

    def keep_digest(self, digest: str, value: T) -> None:
        """Keep `value` under a file's sha256 the caller knows (the oldest kept one goes)."""
        self._kept.pop(digest, None)
        self._kept[digest] = value
        while len(self._kept) > self._capacity:
            del self._kept[next(iter(self._kept))]

    def get(self, path: Path) -> T | None:
        """The value kept for this exact, unchanged file, if any (it stays kept)."""
        digest = known_sha256(Path(path))
        return self._kept.get(digest) if digest is not None else None

    def get_digest(self, digest: str) -> T | None:
        """The value kept under this sha256, if any (it stays kept)."""
        return self._kept.get(digest)

    def take(self, path: Path) -> T | None:
        """The value kept for this exact, unchanged file, handed over once."""
        digest = known_sha256(Path(path))
        return self._kept.pop(digest, None) if digest is not None else None

    def drop_digest(self, digest: str) -> None:
        """Forget the value kept under this sha256 (it no longer fits its file)."""
        self._kept.pop(digest, None)

    def make_room(self) -> None:
        """Drop the oldest values until one more fits, before building it (so a large value and
        the one it replaces are never both held)."""
        while self._kept and len(self._kept) >= self._capacity:
            del self._kept[next(iter(self._kept))]

    def values(self) -> list[T]:
        return list(self._kept.values())

    def __iter__(self) -> Iterator[str]:
        """The digests kept, oldest first."""
        return iter(list(self._kept))

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, digest: object) -> bool:
        return digest in self._kept

    def clear(self) -> None:
        self._kept.clear()
