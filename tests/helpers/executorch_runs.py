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


def run_tiny_mlp(
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    *overrides: str,
    backend: str = "executorch_xnnpack",
) -> tuple[dict[str, Any], list[dict[str, str]], Path]:
    """Run model=mlp on `backend` with the overrides; a FAIL verdict does not raise."""
    cfg = tiny_cfg(
        "mlp",
        "tracking=none",
        f"cache_dir={tmp_path / 'cache'}",
        f"backend={backend}",
        "runtime.iterations=2",
        "analyze.fail_exit_code=false",
        *overrides,
    )
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    run_dir = run_pipeline(cfg, print_summary=False).run_dir
    summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
    gap_file = run_dir / ArtifactName.NUMERIC_GAP_CSV
    gaps = list(csv.DictReader(gap_file.open())) if gap_file.is_file() else []
    return summary, gaps, run_dir
