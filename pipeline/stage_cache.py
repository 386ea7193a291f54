"""Fingerprint cache of finished stages, shared across run directories and processes.

A finished stage's outputs are hard-linked (or copied) into `<cache>/<stage>/<digest>/`; a later
run whose fingerprint matches gets them back in its own run dir instead of running the stage.
A per-fingerprint file lock makes concurrent sweep jobs run a shared stage once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.fingerprint import Fingerprint, file_sha256

RECORD_NAME = "record.json"
RUN_RECORD_DIR = ".pipeline"


@dataclass(frozen=True)
class CachedStage:
    """A finished stage found in the cache."""

    outputs: dict[str, str]
    extra: dict[str, Any]
    source_run_dir: str
    finished_at: str


def _place(src: Path, dst: Path) -> None:
    """Atomically make dst a hard link to (or copy of) src, unless it already has src's bytes."""
    if dst.exists() and (os.path.samefile(src, dst) or file_sha256(src) == file_sha256(dst)):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def _write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


class StageCache:
    """Look up, restore and store stage results by fingerprint digest."""

    def __init__(self, root: Path, enabled: bool = True) -> None:
        self.root = root
        self.enabled = enabled

    def _entry(self, stage: str, digest: str) -> Path:
        return self.root / stage / digest

    @contextlib.contextmanager
    def lock(self, stage: str, digest: str) -> Iterator[None]:
        """Exclusive lock on one fingerprint, so parallel jobs compute it once."""
        if not self.enabled:
            yield
            return
        lock_path = self.root / stage / f"{digest}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def lookup(self, stage: str, digest: str) -> CachedStage | None:
        """The cached result for this fingerprint, if complete."""
        if not self.enabled:
            return None
        record_path = self._entry(stage, digest) / RECORD_NAME
        if not record_path.is_file():
            return None
        try:
            record = json.loads(record_path.read_text())
            cached = CachedStage(
                outputs=dict(record["outputs"]),
                extra=dict(record.get("extra", {})),
                source_run_dir=str(record.get("source_run_dir", "?")),
                finished_at=str(record.get("finished_at", "?")),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        files = self._entry(stage, digest) / "files"
        if not all((files / rel).is_file() for rel in cached.outputs.values()):
            return None
        return cached

    def restore(self, stage: str, digest: str, cached: CachedStage, run_dir: Path) -> None:
        """Put the cached output files into run_dir (hard links where possible)."""
        files = self._entry(stage, digest) / "files"
        for rel in cached.outputs.values():
            _place(files / rel, run_dir / rel)

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
            "fingerprint": fingerprint.to_json(),
            "outputs": dict(outputs),
            "extra": dict(extra),
            "source_run_dir": str(run_dir),
            "finished_at": finished_at,
        }
        if self.enabled:
            entry = self._entry(stage, fingerprint.digest)
            for rel in outputs.values():
                _place(run_dir / rel, entry / "files" / rel)
            _write_json_atomic(entry / RECORD_NAME, record)
        _write_json_atomic(run_dir / RUN_RECORD_DIR / f"{stage}.json", record)

    @staticmethod
    def previous_fingerprint(stage: str, run_dir: Path) -> Fingerprint | None:
        """The fingerprint this run dir last finished the stage with (to explain a re-run)."""
        path = run_dir / RUN_RECORD_DIR / f"{stage}.json"
        try:
            return Fingerprint.from_json(json.loads(path.read_text())["fingerprint"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
