"""An unchanged re-run points at the tracking run that already holds its results.

When every stage is reused and the config is the same (run dir aside), a new MLflow run would be
a duplicate of an earlier one. The earlier invocation left a record `<cache>/invocations/<key>.json`
naming its tracking run; if that run still exists, FINISHED and not deleted, the re-run logs
nothing and says where the results are. `tracking.log_unchanged=true` logs a new run anyway.

The check reads the store without importing MLflow (that import alone is ~1.3 s): a read-only
query of a sqlite store's `runs` table, or the REST API of a server. Anything else, or any doubt
(a corrupt record, a store it cannot read), means: log a new run as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.tracking.store import sqlite_database
from stages.safe_io.atomic_write import write_text_atomic

RECORD_DIR = "invocations"
MAX_RECORD_BYTES = 64 * 1024
_RUN_ID_CHARS = frozenset("0123456789abcdef")


def invocation_key(config: Mapping[str, Any], digests: Sequence[str], uri: str) -> str:
    """What makes two invocations the same: config (run dir aside), stage fingerprints, store."""
    plain = {k: v for k, v in config.items() if k != "run_dir"}
    text = json.dumps([plain, list(digests), uri], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _record_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / RECORD_DIR / f"{key}.json"


def remember_tracking_run(cache_dir: Path, key: str, uri: str, run_id: str, run_dir: Path) -> None:
    """Note which tracking run holds this invocation's results (atomic write)."""
    record = {"uri": uri, "run_id": run_id, "run_dir": str(run_dir)}
    path = _record_path(cache_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record))


def recorded_run_id(cache_dir: Path, key: str, uri: str) -> str | None:
    """The run id an earlier identical invocation recorded, or None (no record, or not trusted)."""
    path = _record_path(cache_dir, key)
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("uri") != uri:
        return None
    run_id = record.get("run_id")
    if not isinstance(run_id, str) or not 0 < len(run_id) <= 64 or set(run_id) - _RUN_ID_CHARS:
        return None
    return run_id


def sqlite_run_finished(uri: str, run_id: str) -> bool:
    """True when a sqlite store holds `run_id`, FINISHED and active (read-only; no MLflow)."""
    db = sqlite_database(uri)
    if db is None or not db.is_file():
        return False
    try:
        with contextlib.closing(
            sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=2)
        ) as connection:
            row = connection.execute(
                "SELECT status, lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)
            ).fetchone()
    except sqlite3.Error:
        return False
    return row is not None and tuple(row) == ("FINISHED", "active")


def server_run_finished(uri: str, run_id: str, timeout_s: float = 3.0) -> bool:
    """True when a tracking server reports `run_id` FINISHED and active (its REST API)."""
    query = urllib.parse.urlencode({"run_id": run_id})
    url = f"{uri.rstrip('/')}/api/2.0/mlflow/runs/get?{query}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            info = json.loads(response.read(MAX_RECORD_BYTES * 16))["run"]["info"]
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return False
    return bool(info.get("status") == "FINISHED" and info.get("lifecycle_stage") == "active")


def finished_run(uri: str, run_id: str) -> bool:
    """Whether the store still holds the run, finished; False where it cannot tell."""
    if uri.startswith("sqlite:///"):
        return sqlite_run_finished(uri, run_id)
    if uri.startswith(("http://", "https://")):
        return server_run_finished(uri, run_id)
    return False


def unchanged_tracking_run(cache_dir: Path, key: str, uri: str) -> str | None:
    """The earlier tracking run this invocation would duplicate, if it is still there."""
    run_id = recorded_run_id(cache_dir, key, uri)
    return run_id if run_id is not None and finished_run(uri, run_id) else None
