"""A tiny model's whole pipeline on an ExecuTorch backend, in-process (no tracking): its
summary.json, numeric_gap.csv rows and run directory."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, open_dict

from pipeline.runner import run_pipeline
from stages.formats.artifacts import ArtifactName


def run_on_executorch(
    make_cfg: Callable[..., DictConfig],
    run_dir: Path,
    cache: Path,
    *overrides: str,
    backend: str = "executorch_xnnpack",
) -> tuple[dict[str, Any], list[dict[str, str]], Path]:
    """Run the pipeline in-process on `backend` into `run_dir` (no tracking, two iterations,
    a FAIL verdict does not raise); its summary.json, numeric_gap.csv rows and run dir."""
    cfg = make_cfg(
        "tracking=none",
        f"cache_dir={cache}",
        f"backend={backend}",
        "runtime.iterations=2",
        "analyze.fail_exit_code=false",
        *overrides,
    )
    with open_dict(cfg):
        cfg.run_dir = str(run_dir)
    done = Path(run_pipeline(cfg, print_summary=False).run_dir)
    summary = json.loads((done / ArtifactName.SUMMARY_JSON).read_text())
    gap_file = done / ArtifactName.NUMERIC_GAP_CSV
    gaps = list(csv.DictReader(gap_file.open())) if gap_file.is_file() else []
    return summary, gaps, done


def run_tiny_mlp(
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    *overrides: str,
    backend: str = "executorch_xnnpack",
) -> tuple[dict[str, Any], list[dict[str, str]], Path]:
    """Run model=mlp on `backend` with the overrides; a FAIL verdict does not raise."""
    return run_on_executorch(
        lambda *more: tiny_cfg("mlp", *more),
        tmp_path / "run",
        tmp_path / "cache",
        *overrides,
        backend=backend,
    )
