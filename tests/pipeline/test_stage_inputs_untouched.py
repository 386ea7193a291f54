"""No stage writes to a file it read: run stage by stage without the cache's read-only guard."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from pipeline.runner import run_pipeline


def _artifacts(run_dir: Path) -> dict[str, tuple[str, int, int]]:
    """sha256, mtime and inode of every artifact (logs and the runner's records left out)."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns, p.stat().st_ino)
        for p in run_dir.iterdir()
        if p.is_file() and p.suffix != ".log" and not p.name.startswith(".")
    }


def test_each_stage_leaves_every_earlier_file_as_it_was(
    tiny_cfg: Callable[..., DictConfig],
) -> None:
    cfg = tiny_cfg("mlp", "tracking=none", "cache=false", "runtime.iterations=2")
    run_dir = Path(cfg.run_dir)
    before: dict[str, tuple[str, int, int]] = {}
    for stage in ("export", "lower", "run", "analyze"):
        cfg.stages = [stage]
        run_pipeline(cfg, print_summary=False)
        after = _artifacts(run_dir)
        assert {name: after[name] for name in before} == before, stage
        assert set(after) > set(before), f"{stage} wrote nothing new"
        before = after
    assert {"exported.pt2", "etrecord.zip", "etdump.etdp", "summary.json"} <= set(before)
