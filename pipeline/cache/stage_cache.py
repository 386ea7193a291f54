"""Fingerprint cache of finished stages, shared across run directories and processes.

A finished stage's outputs are hard-linked (or copied) into `<cache>/<stage>/<digest>/files/`; a
later run whose fingerprint matches gets them back in its own run dir instead of running the
stage. A per-fingerprint file lock makes concurrent sweep jobs run a shared stage once.

The runner asks once per stage (`StageCache.reuse_or_run`): under the fingerprint's lock, a
verified entry (`pipeline.cache.cache_entry`) is restored into the run dir, else the stage is
produced and stored; either way the files are placed first and the records written last
(`pipeline.cache.hard_links.place_files`).

With a bound (`cache_max_mb`), each store removes least recently used entries until the cache
fits, never one in use (`pipeline.cache.cache_bound`); a reuse marks its entry used.

Published files are made read-only and their sha256 is recorded; a lookup re-hashes every file
(once per process and file version: `stages.safe_io.file_digests`) and discards an entry whose
bytes changed (with a warning naming the file), so the stage runs again instead of feeding a
tampered or corrupted artifact to the next one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.cache.cache_bound import trim_cache
from pipeline.cache.cache_entry import (
    FILES_DIR,
    RECORD_NAME,
    CachedStage,
    read_entry,
    remove_tree,
)
from pipeline.cache.file_lock import file_lock
from pipeline.cache.fingerprint import (
    NO_MATCH,
    RUN_RECORD_DIR,
    Fingerprint,
    last_fingerprint,
    run_record_path,
)
from pipeline.cache.hard_links import place_files

__all__ = [
    "RECORD_NAME",
    "RUN_RECORD_DIR",
    "CacheAnswer",
    "CachedStage",
    "Produced",
    "StageCache",
    "remove_tree",
]

log = logging.getLogger("pipeline")

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


class StageCache:
    """Look up, restore and store stage results by fingerprint digest."""

    def __init__(self, root: Path, enabled: bool = True, max_bytes: int | None = None) -> None:
        self.root = root
        self.enabled = enabled
        self.max_bytes = max_bytes  # None: no bound

    def reuse_or_run(
        self,
        stage: str,
        fingerprint: Fingerprint,
        run_dir: Path,
        produce: Callable[[], Produced],
        why_run: str = NO_MATCH,
    ) -> CacheAnswer:
        """The stage's result in `run_dir`: under the fingerprint's lock (parallel jobs compute it
        once), a verified entry restored, else `produce()` run and its outputs stored. `why_run`:
        what changed since the run dir last finished the stage (the reason given if it runs)."""
        digest = fingerprint.digest
        entry = self.root / stage / digest
        with self.lock(stage, digest):
            cached = read_entry(entry, stage) if self.enabled else None
            if cached is not None:
                reason = (
                    f"fingerprint {digest} matches the run finished {cached.finished_at} "
                    f"in {cached.source_run_dir}"
                )
                files = {
                    rel: (entry / FILES_DIR / rel, run_dir / rel) for rel in cached.outputs.values()
                }
                place_files(files, [(run_record_path(run_dir, stage), cached.record)])
                return CacheAnswer(reason, cached.outputs, cached.extra, cached=cached)
            reason = why_run if self.enabled else "cache=false, nothing is reused"
            log.debug("[%s] running (%s)", stage, reason)
            artifacts, outputs, extra = produce()
            self.store(stage, fingerprint, outputs, extra, run_dir)
        return CacheAnswer(reason, outputs, extra, artifacts=artifacts)

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
        return read_entry(self.root / stage / digest, stage) if self.enabled else None

    def restore(self, stage: str, digest: str, cached: CachedStage, run_dir: Path) -> None:
        """Put the cached output files into run_dir (hard links where possible); the run dir
        also records which entry it uses, so cleanup knows the entry is still needed."""
        files = self.root / stage / digest / FILES_DIR
        links = {rel: (files / rel, run_dir / rel) for rel in cached.outputs.values()}
        place_files(links, [(run_record_path(run_dir, stage), cached.record)])

    def store(
        self,
        stage: str,
        fingerprint: Fingerprint,
        outputs: Mapping[str, str],
        extra: Mapping[str, Any],
        run_dir: Path,
    ) -> None:
        """Record a finished stage: link its outputs into the cache (read-only, hashed), then
        write its records last; a bounded cache is then trimmed (`cache_max_mb`)."""
        record = {
            "stage": stage,
            "digest": fingerprint.digest,
            "fingerprint": fingerprint.to_json(),
            "outputs": dict(outputs),
            "sha256": {},
            "extra": dict(extra),
            "source_run_dir": str(run_dir),
            "finished_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        entry = self.root / stage / fingerprint.digest
        run_record = (run_record_path(run_dir, stage), record)
        if not self.enabled:
            place_files({}, [run_record])
            return
        files = {rel: (run_dir / rel, entry / FILES_DIR / rel) for rel in outputs.values()}
        place_files(files, [(entry / RECORD_NAME, record), run_record], publish=True)
        if self.max_bytes is None:
            return
        trim = trim_cache(self.root, self.max_bytes, keep=[entry])  # least recently used first
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
        return last_fingerprint(stage, run_dir)
