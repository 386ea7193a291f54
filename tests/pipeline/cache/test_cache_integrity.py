"""The stage cache proves what it reuses: read-only artifacts, recorded sha256, verified reuse."""

from __future__ import annotations

import hashlib
import json
import logging
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict

from pipeline.cache.stage_cache import StageCache
from pipeline.runner import PipelineResult, run_pipeline

STAGES = ["export", "lower", "run", "analyze"]
# One case per kind of artifact a later run may reuse: (stage that wrote it, file name).
# `test_published_artifacts_are_read_only_and_hashed` checks this is every output a run records.
CACHED_ARTIFACTS = [
    ("export", "exported.pt2"),
    ("export", "inputs.pt"),
    ("export", "reference_outputs.pt"),
    ("export", "inputs.json"),
    ("lower", "etrecord.zip"),
    ("lower", "lowered_program.zip"),
    ("lower", "lowering.json"),
    ("run", "etdump.etdp"),
    ("run", "debug.bin"),
    ("run", "run_outputs.pt"),
    ("analyze", "summary.json"),
    ("analyze", "events.csv"),
    ("analyze", "numeric_gap.csv"),
    ("analyze", "trace.json"),
    ("analyze", "report.html"),
    ("analyze", "top_ops_p50.svg"),
    ("analyze", "numeric_gap.svg"),
    ("analyze", "explorer_latency.json"),
    ("analyze", "explorer_local_gap.json"),
    ("analyze", "explorer_accumulated_gap.json"),
    ("analyze", "explorer_placement.json"),
    ("analyze", "explorer_divergence.json"),
]
# Artifacts a recomputation writes byte for byte again (zips carry timestamps; ETDumps timings).
BYTE_STABLE = {"exported.pt2", "inputs.pt", "reference_outputs.pt", "inputs.json", "debug.bin"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(cfg: DictConfig, run_dir: Path) -> PipelineResult:
    with open_dict(cfg):
        cfg.run_dir = str(run_dir)
    return run_pipeline(cfg, print_summary=False)


def _entry(cfg: DictConfig, run_dir: Path, stage: str) -> Path:
    record = json.loads((run_dir / ".pipeline" / f"{stage}.json").read_text())
    return Path(cfg.cache_dir) / stage / record["digest"]


def _status(result: PipelineResult) -> dict[str, str]:
    return {outcome.name: outcome.status for outcome in result.stages}


def test_published_artifacts_are_read_only_and_hashed(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = tiny_cfg("mlp", "tracking=none", "backend.precision=fp16")  # gaps: a gap plot
    result = _run(cfg, tmp_path / "a")
    recorded = set()
    for stage in STAGES:
        entry = _entry(cfg, result.run_dir, stage)
        record = json.loads((entry / "record.json").read_text())
        assert set(record["sha256"]) == set(record["outputs"].values())
        recorded |= {(stage, rel) for rel in record["outputs"].values()}
        for rel, digest in record["sha256"].items():
            published = entry / "files" / rel
            assert published.stat().st_mode & 0o222 == 0, f"{published} is writable"
            assert _sha(published) == digest
            # The run dir holds the same read-only inode, not a second copy.
            assert (result.run_dir / rel).samefile(published)
    # The corruption test below covers every kind of artifact the cache publishes.
    assert recorded == set(CACHED_ARTIFACTS)


@pytest.mark.parametrize(("stage", "name"), CACHED_ARTIFACTS)
def test_a_corrupted_cached_artifact_is_discarded_with_a_warning_and_recomputed(
    stage: str,
    name: str,
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = tiny_cfg("mlp", "tracking=none", "backend.precision=fp16")  # gaps: a gap plot
    first = _run(cfg, tmp_path / "a")
    summary = json.loads((first.run_dir / "summary.json").read_text())
    assert summary["verdict"] == "pass"
    entry = _entry(cfg, first.run_dir, stage)
    cached = entry / "files" / name
    original = _sha(cached)

    # Flip one byte in the middle (a bit flip on disk, or a tampered shared cache).
    cached.chmod(0o644)
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0x01
    cached.write_bytes(bytes(data))
    corrupted = _sha(cached)

    with caplog.at_level(logging.WARNING, logger="pipeline"):
        second = _run(cfg, tmp_path / "b")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(cached) in w and "recomputing" in w for w in warnings), warnings

    statuses = _status(second)
    assert statuses[stage] == "done"  # recomputed, not reused
    earlier = STAGES[: STAGES.index(stage)]
    assert all(statuses[s] == "reused" for s in earlier), statuses
    rebuilt = second.run_dir / name
    assert _sha(rebuilt) != corrupted
    if name in BYTE_STABLE:
        assert _sha(rebuilt) == original  # deterministic artifacts come back byte for byte
    again = json.loads((second.run_dir / "summary.json").read_text())
    assert again["verdict"] == "pass"
    assert again["compared_outputs"] == summary["compared_outputs"]
    # The recomputed entry is whole again: a third run reuses every stage.
    third = _run(cfg, tmp_path / "c")
    assert set(_status(third).values()) == {"reused"}
    assert StageCache(Path(cfg.cache_dir)).lookup(stage, _entry(cfg, third.run_dir, stage).name)
    assert stat.S_IMODE((third.run_dir / name).stat().st_mode) & 0o222 == 0
