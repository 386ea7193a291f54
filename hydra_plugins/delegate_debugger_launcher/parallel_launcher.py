"""`hydra/launcher=parallel` (the default): sweep jobs in parallel worker processes.

A thin plugin shim: the work is `pipeline.sweeps.parallel_launch.launch_jobs`. Hydra imports
every module of `hydra_plugins` at start-up, so this one imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class ParallelLauncher(Launcher):
    """Runs a sweep's jobs `n_jobs` at a time (-1: one per usable core) in reused workers."""

    def __init__(self, n_jobs: int = -1) -> None:
        self.n_jobs = n_jobs
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.task_function = task_function
        self.hydra_context = hydra_context

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from pipeline.sweeps.parallel_launch import launch_jobs

        if self.config is None or self.task_function is None or self.hydra_context is None:
            raise RuntimeError("ParallelLauncher.launch() before setup()")
        return launch_jobs(
            self.config,
            self.hydra_context,
            self.task_function,
            job_overrides,
            initial_job_idx,
        )
