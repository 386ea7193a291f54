"""CLI: `python -m pipeline model=vit backend=xnnpack` (a thin @hydra.main around run_pipeline)."""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from pipeline.config import register_configs
from pipeline.errors import PipelineError
from pipeline.hydra_run import run_from_hydra
from pipeline.run_dirs import register_run_suffix

register_configs()
register_run_suffix()


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Run the pipeline for one composed config (one job of a sweep)."""
    try:
        run_from_hydra(cfg)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            # One failed job must not abort the sweep: its child run is already marked FAILED
            # and the sweep callback reports it (and exits non-zero) when all jobs are done.
            return
        sys.exit(1)


if __name__ == "__main__":
    main()
