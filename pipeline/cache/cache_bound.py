"""The stage cache kept under `cache_max_mb`: after a store, least recently used entries go
until the cache fits, never one in use.

An entry is `<cache>/<stage>/<digest>/` with its `record.json`; its last use is that record's
mtime (set when the entry is stored, and again each time a run reuses it). An entry is left
when another process holds its lock (`<stage>/<digest>.lock`: it is being stored, looked up
or restored), when it was used in the last `RECENT_S` seconds (a process may be reading its
files), and when the caller keeps it (the entry just stored). One process trims at a time
(`.trim.lock`); another that finds it taken leaves the trim to it. Sizes count each file of
the cache once (run dirs hold hard links to the same files: an entry's bytes leave the disk
when the run dirs that link them go too, `python -m pipeline.tools.clean --keep N`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.cache.file_lock import try_file_lock

RECORD_NAME = "record.json"
TRIM_LOCK = ".trim.lock"
RECENT_S = 60.0  # an entry used this recently is never removed
MB = 1_000_000  # as `python -m pipeline.tools.clean` counts


@dataclass(frozen=True)
class CacheEntry:
    """One finished stage in the cache: where, how big, when last used."""

    path: Path
    size: int  # bytes of its files no entry listed before it counts
    used: float  # mtime of its record.json

    @property
    def lock(self) -> Path:
        return self.path.parent / f"{self.path.name}.lock"


@dataclass
class Trim:
    """What a trim removed (or, dry, would remove) and what the cache holds after it."""

    removed: list[CacheEntry] = field(default_factory=list)
    left_in_use: list[CacheEntry] = field(default_factory=list)
    entries: int = 0
    size: int = 0
    skipped: bool = False  # another process was trimming


def _size(entry: Path, seen: set[tuple[int, int]]) -> int:
    total = 0
    for root, _, files in os.walk(entry):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                info = os.lstat(os.path.join(root, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_size
    return total


def cache_entries(root: Path) -> list[CacheEntry]:
    """The cache's finished entries, least recently used first."""
    found = []
    for record in root.glob(f"*/*/{RECORD_NAME}") if root.is_dir() else []:
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another process
            found.append((record.stat().st_mtime, record.parent))
    seen: set[tuple[int, int]] = set()
    return [CacheEntry(path, _size(path, seen), used) for used, path in sorted(found)]


def trim_cache(
    root: Path,
    max_bytes: int,
    keep: Collection[Path] = (),
    dry_run: bool = False,
    recent_s: float = RECENT_S,
) -> Trim:
    """Remove least recently used entries until the cache holds at most `max_bytes` (entries
    used in the last `recent_s` seconds, locked or kept are left)."""
    with try_file_lock(root / TRIM_LOCK) as taken:
        if not taken:
            return Trim(skipped=True)
        entries = cache_entries(root)
        trim = Trim(entries=len(entries), size=sum(e.size for e in entries))
        recent = time.time() - recent_s
        for entry in entries:
            if trim.size <= max_bytes:
                break
            if entry.path in keep or entry.used > recent:
                trim.left_in_use.append(entry)
                continue
            with try_file_lock(entry.lock) as free:
                if not free:
                    trim.left_in_use.append(entry)
                    continue
                if not dry_run:  # the record first: a half-removed entry is never complete
                    (entry.path / RECORD_NAME).unlink(missing_ok=True)
                    shutil.rmtree(entry.path, ignore_errors=True)
            trim.removed.append(entry)
            trim.size -= entry.size
            trim.entries -= 1
        return trim
