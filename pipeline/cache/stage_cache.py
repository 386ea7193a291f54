"""Fingerprint cache of finished stages, shared across run directories and processes.

A finished stage's outputs are hard-linked (or copied) into `<cache>/<stage>/<digest>/`; a later
run whose fingerprint matches gets them back in its own run dir instead of running the stage.
A per-fingerprint file lock makes concurrent sweep jobs run a shared stage once.

The runner asks once per stage (`StageCache.reuse_or_run`): under the fingerprint's lock, a
verified entry is restored into the run dir, else the stage is produced and stored.

With a bound (`cache_max_mb`), each store removes least recently used entries until the cache
fits, never one in use (`pipeline.cache.cache_bound`); a reuse marks its entry used.

Published files are made read-only and their sha256 is recorded; a lookup re-hashes every file
(once per process and file version: `stages.safe_io.file_digests`) and discards an entry whose
bytes changed (with a warning naming the file), so the stage runs again instead of feeding a
tampered or corrupted artifact to the next one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.cache.cache_bound import trim_cache
from pipeline.cache.file_lock import file_lock
from pipeline.cache.fingerprint import Fingerprint, explain_change, file_sha256
from pipeline.cache.hard_links import link_or_copy
from stages.safe_io.atomic_write import write_text_atomic

log = logging.getLogger("pipeline")

RECORD_NAME = "record.json"
RUN_RECORD_DIR = ".pipeline"
_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


@dataclass(frozen=True)
class CachedStage:
    """A finished stage found in the cache."""

    outputs: dict[str, str]
    hashes: dict[str, str]
    extra: dict[str, Any]
    source_run_dir: str
    finished_at: str
    record: dict[str, Any]


# What producing a stage gives the cache: its artifacts, its output files (key -> path relative to
# the run dir) and the extra record fields (metrics, torch threads).
Produced = tuple[Any, Mapping[str, str], Mapping[str, Any]]


@dataclass(frozen=True)
class CacheAnswer:
    """A stage's result through the cache: the reused entry (`cached`), or what `produce` made
    (`artifacts`); either way its output files (`outputs`) and record extras; `reason` says why
    it was reused or run."""

    reason: str
    outputs: Mapping[str, str]
    extra: Mapping[str, Any]
    cached: CachedStage | None = None
    artifacts: Any = None


def make_read_only(path: Path) -> None:
    """Clear every write bit: a published artifact is never edited in place."""
    mode = path.stat().st_mode
    if mode & _WRITE_BITS:
        path.chmod(mode & ~_WRITE_BITS)


def _write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def remove_tree(path: Path) -> None:
    """Remove a cache entry (its files are read-only, its directories are not)."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


class StageCache:
    """Look up, restore and store stage results by fingerprint digest."""

    def __init__(self, root: Path, enabled: bool = True, max_bytes: int | None = None) -> None:
        self.root = root
        self.enabled = enabled
        self.max_bytes = max_bytes  # None: no bound (`cache_bound.bound_bytes`)

    def _entry(self, stage: str, digest: str) -> Path:
        return self.root / stage / digest

    def reuse_or_run(
        self, stage: str, fingerprint: Fingerprint, run_dir: Path, produce: Callable[[], Produced]
    ) -> CacheAnswer:
        """The stage's result in `run_dir`: under the fingerprint's lock (parallel jobs compute it
        once), a verified entry restored, else `produce()` run and its outputs stored."""
        digest = fingerprint.digest
        with self.lock(stage, digest):
            cached = self.lookup(stage, digest)
            if cached is not None:
                self.restore(stage, digest, cached, run_dir)
                reason = (
                    f"fingerprint {digest} matches the run finished {cached.finished_at} "
                    f"in {cached.source_run_dir}"
                )
                return CacheAnswer(reason, cached.outputs, cached.extra, cached=cached)
            reason = self._why_run(stage, fingerprint, run_dir)
            log.debug("[%s] running (%s)", stage, reason)
            artifacts, outputs, extra = produce()
            self.store(stage, fingerprint, outputs, extra, run_dir)
        return CacheAnswer(reason, outputs, extra, artifacts=artifacts)

    def _why_run(self, stage: str, fingerprint: Fingerprint, run_dir: Path) -> str:
        """Why the stage runs: the cache is off, what changed since this run dir's last run of
        it, or no entry has this fingerprint."""
        if not self.enabled:
            return "cache=false, nothing is reused"
        previous = self.previous_fingerprint(stage, run_dir)
        if previous is not None:
            return explain_change(previous, fingerprint)
        return "no finished run with this fingerprint"

    @contextlib.contextmanager
    def lock(self, stage: str, digest: str) -> Iterator[None]:
        """Exclusive lock on one fingerprint, so parallel jobs compute it once."""
        if not self.enabled:
            yield
            return
        with file_lock(self.root / stage / f"{digest}.lock"):
            yield

    def lookup(self, stage: str, digest: str) -> CachedStage | None:
        """The cached result for this fingerprint, if complete and every file has its bytes."""
        if not self.enabled:
            return None
        entry = self._entry(stage, digest)
        record_path = entry / RECORD_NAME
        if not record_path.is_file():
            return None
        try:
            record = json.loads(record_path.read_text())
            cached = CachedStage(
                outputs=dict(record["outputs"]),
                hashes=dict(record["sha256"]),
                extra=dict(record.get("extra", {})),
                source_run_dir=str(record.get("source_run_dir", "?")),
                finished_at=str(record.get("finished_at", "?")),
                record=dict(record),
            )
        except (OSError, ValueError, KeyError, TypeError):
            log.warning(
                "[%s] cache entry %s has an unreadable record (%s): discarding it and recomputing",
                stage,
                entry,
                record_path,
            )
            remove_tree(entry)
            return None
        problem = self._verify(entry / "files", cached)
        if problem is not None:
            log.warning("[%s] %s: discarding cache entry %s and recomputing", stage, problem, entry)
            remove_tree(entry)
            return None
        with contextlib.suppress(OSError):  # its last use, for a bounded cache's trim
            os.utime(record_path)
        return cached

    @staticmethod
    def _verify(files: Path, cached: CachedStage) -> str | None:
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

    def restore(self, stage: str, digest: str, cached: CachedStage, run_dir: Path) -> None:
        """Put the cached output files into run_dir (hard links where possible).

        The run dir also records which entry it uses, so cleanup knows the entry is still needed.
        """
        files = self._entry(stage, digest) / "files"
        for rel in cached.outputs.values():
            link_or_copy(files / rel, run_dir / rel)
        _write_json_atomic(run_dir / RUN_RECORD_DIR / f"{stage}.json", cached.record)

    def store(
        self,
        stage: str,
        fingerprint: Fingerprint,
        outputs: Mapping[str, str],
        extra: Mapping[str, Any],
        run_dir: Path,
    ) -> None:
        """Record a finished stage: link its outputs into the cache, then write the record last."""
        finished_at = time.strftime("%Y-%m-%d %H:%M:%S")
        record = {
            "stage": stage,
            "digest": fingerprint.digest,
            "fingerprint": fingerprint.to_json(),
            "outputs": dict(outputs),
            "sha256": {},
            "extra": dict(extra),
            "source_run_dir": str(run_dir),
            "finished_at": finished_at,
        }
        if self.enabled:
            entry = self._entry(stage, fingerprint.digest)
            hashes: dict[str, str] = {}
            for rel in outputs.values():
                published = entry / "files" / rel
                link_or_copy(run_dir / rel, published)
                make_read_only(published)
                hashes[rel] = file_sha256(published)
            record["sha256"] = hashes
            _write_json_atomic(entry / RECORD_NAME, record)
            self._trim(stage, entry)
        _write_json_atomic(run_dir / RUN_RECORD_DIR / f"{stage}.json", record)

    def _trim(self, stage: str, stored: Path) -> None:
        """Keep a bounded cache under its bound (least recently used entries go first)."""
        if self.max_bytes is None:
            return
        trim = trim_cache(self.root, self.max_bytes, keep=[stored])
        if trim.removed:
            freed = sum(e.size for e in trim.removed) / 1e6
            log.info(
                "[%s] stage cache over cache_max_mb: removed %d least recently used entr%s "
                "(%.1f MB); %d left, %.1f MB",
                stage,
                len(trim.removed),
                "y" if len(trim.removed) == 1 else "ies",
                freed,
                trim.entries,
                trim.size / 1e6,
            )

    @staticmethod
    def previous_fingerprint(stage: str, run_dir: Path) -> Fingerprint | None:
        """The fingerprint this run dir last finished the stage with (to explain a re-run)."""
        path = run_dir / RUN_RECORD_DIR / f"{stage}.json"
        try:
            return Fingerprint.from_json(json.loads(path.read_text())["fingerprint"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
