"""Bridge from a Hydra job to run_pipeline: the run dir and the resume command come from Hydra."""

from __future__ import annotations

import shlex

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from pipeline.runner import PipelineResult, run_pipeline


def run_from_hydra(cfg: DictConfig) -> PipelineResult:
    """Run in Hydra's output dir; the resume command repeats this job's overrides there."""
    hydra_cfg = HydraConfig.get()
    run_dir = hydra_cfg.runtime.output_dir
    with open_dict(cfg):
        cfg.run_dir = run_dir
    overrides = [o for o in hydra_cfg.overrides.task if not o.startswith("hydra.run.dir=")]
    resume = shlex.join(["python", "-m", "pipeline", *overrides, f"hydra.run.dir={run_dir}"])
    return run_pipeline(cfg, resume_command=resume)
