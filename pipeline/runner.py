"""`run_pipeline(cfg)`: the options checked into a plan, the op names checked against the
exported program, then the stages run in order under tracking (reusing finished ones)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from pipeline.errors import StageFailedError
from pipeline.flow.op_names_preflight import check_op_names_before_stages
from pipeline.flow.run_plan import plan_run
from pipeline.flow.tracked_run import run_tracked
from pipeline.outcomes import PipelineResult
from pipeline.tracking.dependency_logs import keep_dependency_noise_in_log_files
from pipeline.tracking.mlflow_tracker import Tracker

__all__ = ["PipelineResult", "StageFailedError", "run_pipeline"]


def run_pipeline(
    cfg: DictConfig,
    *,
    resume_command: str | None = None,
    tracker: Tracker | None = None,
    print_summary: bool = True,
    base_dir: Path | None = None,
) -> PipelineResult:
    """Run `cfg.stages` in order into `cfg.run_dir`; usable with or without Hydra.

    `base_dir` (default: the working directory) is where relative model file paths start."""
    keep_dependency_noise_in_log_files()  # Hydra's handlers exist; checks may import ExecuTorch
    plan = plan_run(cfg, base_dir or Path.cwd(), resume_command)
    with check_op_names_before_stages(plan) as preflight:
        return run_tracked(plan, preflight, tracker, print_summary)
