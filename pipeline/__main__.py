"""CLI: `python -m pipeline model=vit backend=xnnpack` (a thin @hydra.main around run_pipeline)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from pipeline.config import register_configs
from pipeline.errors import PipelineError
from pipeline.hydra_run import run_from_hydra

register_configs()


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Run the pipeline for one composed config (one job of a sweep)."""
    try:
        run_from_hydra(cfg)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
