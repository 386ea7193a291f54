"""The stage cache bounded by `cache_max_mb` (issue 48), on real files: a store past the bound
removes the least recently used entries (a reuse counts as a use), never one another process
holds locked or one used in the last minute; `python -m pipeline.tools.clean` shows the cache
and trims it; a run through the CLI trims what older runs left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cache.cache_bound import MB, cache_entries, trim_cache
from pipeline.cache.file_lock import file_lock
from pipeline.cache.fingerprint import Fingerprint, compute_fingerprint
from pipeline.cache.stage_cache import RECORD_NAME, StageCache
from tests.helpers.cli_runner import REPO, run_module

# An entry's file: the entry with its record.json is just under 1 MB.
FILE = MB - 4096


def _store(cache: StageCache, tmp_path: Path, name: str, age_s: float = 0.0) -> Fingerprint:
    """A finished 'export' stage with one file, stored `age_s` seconds ago (an entry ~1 MB)."""
    run_dir = tmp_path / "runs" / name
    run_dir.mkdir(parents=True)
    (run_dir / "exported.pt2").write_bytes(os.urandom(FILE))
    fingerprint = compute_fingerprint({"model": {"name": name}}, [], ("pipeline",))
    cache.store("export", fingerprint, {"exported_program": "exported.pt2"}, {}, run_dir)
    if age_s:
        _age(cache, fingerprint, age_s)
    return fingerprint


def _age(cache: StageCache, fingerprint: Fingerprint, age_s: float) -> None:
    when = time.time() - age_s
    os.utime(cache.root / "export" / fingerprint.digest / RECORD_NAME, (when, when))


def _left(cache: StageCache, *fingerprints: Fingerprint) -> list[bool]:
    return [(cache.root / "export" / f.digest / RECORD_NAME).is_file() for f in fingerprints]


def test_a_store_past_the_bound_removes_the_least_recently_used_entry(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache", max_bytes=int(3.5 * MB))
    a = _store(cache, tmp_path, "a", age_s=400)
    b = _store(cache, tmp_path, "b", age_s=300)
    c = _store(cache, tmp_path, "c", age_s=200)
    assert _left(cache, a, b, c) == [True, True, True]  # 3 MB: within the bound
    assert cache.lookup("export", a.digest) is not None  # a run reuses a: its last use is now
    d = _store(cache, tmp_path, "d")  # 4 MB: one entry must go, the least recently used
    assert _left(cache, a, b, c, d) == [True, False, True, True]
    assert not (cache.root / "export" / b.digest).exists()
    assert 3 * FILE < sum(e.size for e in cache_entries(cache.root)) < 3 * MB
    # The removed entry's run dir keeps its file (a hard link), and the stage runs again later.
    assert (tmp_path / "runs" / "b" / "exported.pt2").stat().st_size == FILE
    assert cache.lookup("export", b.digest) is None


_HOLD_LOCK = """
import sys
from pathlib import Path
from pipeline.cache.file_lock import file_lock
with file_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_trim_leaves_entries_locked_by_another_process_recent_or_kept(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")  # no bound: the test trims
    old = [_store(cache, tmp_path, name, age_s=500 - 100 * i) for i, name in enumerate("abcd")]
    recent = _store(cache, tmp_path, "recent")
    kept = _store(cache, tmp_path, "kept", age_s=600)
    locked = old[1]
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(cache.root / "export" / f"{locked.digest}.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        keep = [cache.root / "export" / kept.digest]
        dry = trim_cache(cache.root, 0, keep=keep, dry_run=True)
        assert [e.path.name for e in dry.removed] == [old[0].digest, old[2].digest, old[3].digest]
        assert all(_left(cache, *old))  # a dry trim removes nothing
        trim = trim_cache(cache.root, 0, keep=keep)
        assert {e.path.name for e in trim.left_in_use} == {
            kept.digest,
            locked.digest,
            recent.digest,
        }
        assert _left(cache, *old, recent, kept) == [False, True, False, False, True, True]
        assert 3 * FILE < trim.size < 3 * MB and trim.entries == 3
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=60)
    # Released, it goes like the others; a trim another process is running is left to it.
    assert trim_cache(cache.root, 0, keep=keep).removed[0].path.name == locked.digest
    with file_lock(cache.root / ".trim.lock"):
        assert trim_cache(cache.root, 0).skipped


def test_clean_shows_the_stage_cache_and_trims_it(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    cache = StageCache(outputs / "cache")
    a, b, c = (_store(cache, tmp_path, name, age_s=300 - 100 * i) for i, name in enumerate("abc"))
    shown = run_module("pipeline.tools.clean", cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"stage cache {outputs / 'cache'}: 3 entries, 3.0 MB (export 3)" in shown.stdout
    dry = run_module("pipeline.tools.clean", "--cache-max-mb", "2", "--dry-run", cwd=tmp_path)
    assert f"would remove {cache.root / 'export' / a.digest} (1.0 MB)" in dry.stdout
    assert _left(cache, a, b, c) == [True, True, True]
    trimmed = run_module("pipeline.tools.clean", "--cache-max-mb", "1", cwd=tmp_path)
    assert trimmed.returncode == 0, trimmed.stderr
    assert "stage cache to 1 MB: removed 2 least recently used entries (2.0 MB)" in trimmed.stdout
    assert _left(cache, a, b, c) == [False, False, True]
    assert "1 entries, 1.0 MB" in trimmed.stdout


@pytest.mark.e2e
def test_a_run_trims_what_older_runs_left_and_refuses_a_negative_bound(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")
    older = [_store(cache, tmp_path, name, age_s=3600) for name in ("old1", "old2")]
    args = ["model=mlp", "tracking=none", f"cache_dir={cache.root}", "hydra.run.dir=run"]
    result = run_module("pipeline", *args, "cache_max_mb=1", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _left(cache, *older) == [False, False]
    stages = {e.path.parent.name for e in cache_entries(cache.root)}
    assert stages == {"export", "lower", "run", "analyze"}  # the run's own: used just now
    refused = run_module("pipeline", *args, "cache_max_mb=-1", cwd=tmp_path, timeout=600)
    assert refused.returncode == 1 and "cache_max_mb=-1" in refused.stderr
    assert "Traceback" not in refused.stderr
