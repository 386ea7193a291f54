"""One finished stage in the cache, `<cache>/<stage>/<digest>/`, read back: its record parsed and
every file re-hashed against it; an entry that fails either is removed (with a warning naming
the file) so the stage runs again instead of feeding a tampered or corrupted artifact on."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.safe_io.file_digests import file_sha256

log = logging.getLogger("pipeline")

RECORD_NAME = "record.json"
FILES_DIR = "files"


@dataclass(frozen=True)
class CachedStage:
    """A finished stage found in the cache."""

    outputs: dict[str, str]
    hashes: dict[str, str]
    extra: dict[str, Any]
    source_run_dir: str
    finished_at: str
    record: dict[str, Any]


def remove_tree(path: Path) -> None:
    """Remove a cache entry (its files are read-only, its directories are not)."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


def _parsed(record_path: Path) -> CachedStage | None:
    try:
        record = json.loads(record_path.read_text())
        return CachedStage(
            outputs=dict(record["outputs"]),
            hashes=dict(record["sha256"]),
            extra=dict(record.get("extra", {})),
            source_run_dir=str(record.get("source_run_dir", "?")),
            finished_at=str(record.get("finished_at", "?")),
            record=dict(record),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _problem(files: Path, cached: CachedStage) -> str | None:
    """None when every output is there with its recorded sha256, else what is wrong."""
    for rel in cached.outputs.values():
        path = files / rel
        expected = cached.hashes.get(rel)
        if expected is None:
            return f"cached {path} has no recorded sha256"
        if not path.is_file():
            return f"cached {path} is missing"
        found = file_sha256(path)
        if found != expected:
            return (
                f"cached {path} does not match its recorded sha256 "
                f"(expected {expected[:16]}…, found {found[:16]}…)"
            )
    return None


def read_entry(entry: Path, stage: str) -> CachedStage | None:
    """The entry's finished stage if its record is readable and every file has its bytes (its
    last use then marked, for a bounded cache's trim); None, the entry removed, otherwise."""
    record_path = entry / RECORD_NAME
    if not record_path.is_file():
        return None
    cached = _parsed(record_path)
    problem = None if cached is None else _problem(entry / FILES_DIR, cached)
    if cached is None:
        log.warning(
            "[%s] cache entry %s has an unreadable record (%s): discarding it and recomputing",
            stage,
            entry,
            record_path,
        )
    elif problem is not None:
        log.warning("[%s] %s: discarding cache entry %s and recomputing", stage, problem, entry)
    if cached is None or problem is not None:
        remove_tree(entry)
        return None
    with contextlib.suppress(OSError):  # its last use, for a bounded cache's trim
        os.utime(record_path)
    return cached
