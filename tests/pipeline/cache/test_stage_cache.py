import os
from collections.abc import Callable
from pathlib import Path

from pipeline.cache.fingerprint import compute_fingerprint
from pipeline.cache.stage_cache import Produced, StageCache


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


def test_reuse_or_run_runs_once_then_restores_the_entry_into_another_run_dir(
    tmp_path: Path,
) -> None:
    cache = StageCache(tmp_path / "cache")
    fp = compute_fingerprint({"model": {"name": "m"}}, [], ("pipeline",))
    runs: list[Path] = []

    def produce_in(run_dir: Path) -> Callable[[], Produced]:
        def produce() -> Produced:
            runs.append(run_dir)
            (run_dir / "exported.pt2").write_bytes(b"program")
            return "artifacts", {"exported_program": "exported.pt2"}, {"metrics": {"n": 1.0}}

        return produce

    run_a, run_b = tmp_path / "a", tmp_path / "b"
    run_a.mkdir()
    ran = cache.reuse_or_run("export", fp, run_a, produce_in(run_a))
    assert ran.cached is None and ran.artifacts == "artifacts"
    assert ran.reason == "no finished run with this fingerprint"
    reused = cache.reuse_or_run("export", fp, run_b, produce_in(run_b))
    assert runs == [run_a]  # the second run dir got the entry, nothing ran
    assert reused.cached is not None and reused.artifacts is None
    assert reused.reason.startswith(f"fingerprint {fp.digest} matches the run finished")
    assert dict(reused.outputs) == {"exported_program": "exported.pt2"}
    assert dict(reused.extra)["metrics"] == {"n": 1.0}
    assert (run_b / "exported.pt2").samefile(run_a / "exported.pt2")


def test_reuse_or_run_without_the_cache_runs_each_time_and_says_why(tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache", enabled=False)
    fp = compute_fingerprint({"model": {"name": "m"}}, [], ("pipeline",))
    run = tmp_path / "run"
    run.mkdir()
    (run / "x.bin").write_bytes(b"x")
    for _ in range(2):
        answer = cache.reuse_or_run("run", fp, run, lambda: (None, {"x": "x.bin"}, {}))
        assert answer.cached is None and answer.reason == "cache=false, nothing is reused"
    assert not (tmp_path / "cache").exists()
