"""Analyze tests: tiny pipeline runs sharing one stage cache, so each model is exported once."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.helpers.analyze_runs import RunTiny
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config


@pytest.fixture(scope="session")
def run_tiny(tmp_path_factory: pytest.TempPathFactory) -> RunTiny:
    """run_tiny(label, model, *overrides) -> run dir of a finished tiny pipeline run."""
    root = tmp_path_factory.mktemp("analyze_runs")
    cache = root / "cache"

    def _run(label: str, model: str, *overrides: str) -> Path:
        cfg = compose_config(
            root / label,
            [*TINY_MODEL_OVERRIDES[model], "tracking=none", f"cache_dir={cache}", *overrides],
        )
        with open_dict(cfg):
            cfg.run_dir = str(root / label / "run")
        run_pipeline(cfg, print_summary=False)
        return Path(cfg.run_dir)

    return _run
