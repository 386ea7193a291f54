import os
from pathlib import Path

from pipeline.cache.fingerprint import compute_fingerprint
from pipeline.cache.stage_cache import StageCache


def test_store_then_restore_into_another_run_dir(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    run_a.mkdir()
    (run_a / "exported.pt2").write_bytes(b"program")
    fp = compute_fingerprint({"model": {"name": "m"}}, [], ("pipeline",))

    assert cache.lookup("export", fp.digest) is None
    cache.store("export", fp, {"exported_program": "exported.pt2"}, {"metrics": {"n": 1.0}}, run_a)
    found = cache.lookup("export", fp.digest)
    assert found is not None and found.extra["metrics"] == {"n": 1.0}

    cache.restore("export", fp.digest, found, run_b)
    assert (run_b / "exported.pt2").read_bytes() == b"program"
    # The run dir remembers the fingerprint it finished with, to explain a later re-run.
    assert cache.previous_fingerprint("export", run_a) == fp


def test_restore_replaces_a_file_a_later_stage_rewrote(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")
    run = tmp_path / "run"
    run.mkdir()
    (run / "etrecord.zip").write_bytes(b"export part")
    fp = compute_fingerprint({}, [], ("pipeline",))
    cache.store("export", fp, {"etrecord": "etrecord.zip"}, {}, run)
    # A later stage replaces the file atomically (new inode): the cached copy must not change.
    tmp = run / "new"
    tmp.write_bytes(b"export part + lowering")
    os.replace(tmp, run / "etrecord.zip")
    found = cache.lookup("export", fp.digest)
    assert found is not None
    cache.restore("export", fp.digest, found, run)
    assert (run / "etrecord.zip").read_bytes() == b"export part"


def test_incomplete_entry_is_not_a_hit(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")
    run = tmp_path / "run"
    run.mkdir()
    (run / "x.bin").write_bytes(b"x")
    fp = compute_fingerprint({}, [], ("pipeline",))
    cache.store("run", fp, {"x": "x.bin"}, {}, run)
    (tmp_path / "cache" / "run" / fp.digest / "files" / "x.bin").unlink()
    assert cache.lookup("run", fp.digest) is None


def test_disabled_cache_never_hits(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache", enabled=False)
    run = tmp_path / "run"
    run.mkdir()
    (run / "x.bin").write_bytes(b"x")
    fp = compute_fingerprint({}, [], ("pipeline",))
    cache.store("run", fp, {"x": "x.bin"}, {}, run)
    assert cache.lookup("run", fp.digest) is None
