"""One in-process run of the pipeline for a benchmark: a composed config (tiny overrides, no
tracking, one timed iteration, a shared stage cache under `root`), its run dir returned."""

from __future__ import annotations

from pathlib import Path

from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.helpers.configs import compose_config


def run_in(root: Path, label: str, overrides: list[str], fail_exit_code: bool = True) -> Path:
    """Run the pipeline with `overrides` in `root/label/run`; `fail_exit_code=False`: a FAIL
    verdict is recorded, not raised as the exit code."""
    cfg = compose_config(
        root / label,
        [*overrides, "tracking=none", "runtime.iterations=1", f"cache_dir={root / 'cache'}"],
    )
    with open_dict(cfg):
        cfg.run_dir = str(root / label / "run")
        cfg.analyze.fail_exit_code = fail_exit_code
    run_pipeline(cfg, print_summary=False)
    return Path(cfg.run_dir)
