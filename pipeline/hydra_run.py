"""Bridge from a Hydra job to run_pipeline: the run dir and the resume command come from Hydra."""

from __future__ import annotations

import contextlib
import logging
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.cpu_threads import limit_threads, sweep_share, usable_cores
from pipeline.invocation import command_prefix
from pipeline.runner import PipelineResult, run_pipeline

log = logging.getLogger("pipeline")


def _share_cores(hydra_cfg: Any) -> None:
    """Parallel sweep jobs split the cores instead of each taking all of them (oversubscription)."""
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return
    n_jobs = OmegaConf.select(hydra_cfg, "launcher.n_jobs")
    if not isinstance(n_jobs, int) or n_jobs == 1:
        return
    parallel, threads = sweep_share(n_jobs)
    limit_threads(threads)
    log.info(
        "sweep job: %d parallel jobs on %d cores, torch uses %d thread(s)",
        parallel,
        usable_cores(),
        threads,
    )


def run_from_hydra(cfg: DictConfig) -> PipelineResult:
    """Run in Hydra's output dir; the resume command repeats this job's overrides there."""
    hydra_cfg = HydraConfig.get()
    run_dir = hydra_cfg.runtime.output_dir
    with open_dict(cfg):
        cfg.run_dir = run_dir
    _share_cores(hydra_cfg)
    overrides = [o for o in hydra_cfg.overrides.task if not o.startswith("hydra.run.dir=")]
    resume = shlex.join([*command_prefix(), *overrides, f"hydra.run.dir={run_dir}"])
    trial = hydra_cfg.mode == RunMode.MULTIRUN and OmegaConf.select(cfg, "search.kind") is not None
    with _console_quiet(trial):  # a search prints one progress line per trial instead
        return run_pipeline(
            cfg,
            resume_command=resume,
            base_dir=Path(hydra_cfg.runtime.cwd),
            print_summary=not trial,
        )


@contextlib.contextmanager
def _console_quiet(quiet: bool) -> Iterator[None]:
    """Only errors reach the terminal while `quiet` (the log file keeps everything)."""
    consoles = [
        h
        for h in logging.getLogger().handlers
        if type(h) is logging.StreamHandler and quiet  # not a FileHandler (a subclass)
    ]
    levels = [h.level for h in consoles]
    for handler in consoles:
        handler.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for handler, level in zip(consoles, levels, strict=True):
            handler.setLevel(level)
