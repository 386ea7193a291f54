"""The default sweep launcher's work: jobs in worker processes reused across jobs, jobs sharing
an export started apart, every worker ended before the sweep returns.

`hydra_plugins.delegate_debugger_launcher.parallel_launcher.ParallelLauncher` (Hydra finds
launchers only in the `hydra_plugins` package) calls `launch_jobs`; the sweep callback calls
`start_early` so the workers warm up while it sets up MLflow.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from pipeline.cpu_threads import free_cores, runnable_elsewhere, sweep_share, usable_cores
from pipeline.stage_registry import STAGES
from pipeline.sweeps.job_order import SweepJob, interleave_export_groups
from pipeline.sweeps.worker_pool import (
    PoolShape,
    start_workers,
    stop_workers,
    submit,
    unpickled,
)
from pipeline.tracking.client import TRACKER_MODULES

log = logging.getLogger("pipeline")

LAUNCHER_TARGET = "hydra_plugins.delegate_debugger_launcher.parallel_launcher.ParallelLauncher"
ENTRY_MODULE = "pipeline.cli"  # holds the task function every job unpickles
# What the stages load on first use, not at import: torch.export's tracer (torch._dynamo,
# seconds of CPU) and the report's plotting.
LAZY_STAGE_MODULES = ("torch.export._trace", "matplotlib.figure", "matplotlib.backends.backend_svg")


# What the sweep's end (the comparison) loads, imported while the workers start.
COMPARISON_MODULES = (
    "pipeline.sweeps.comparison",
    "stages.analyze.link.event_table",
    "stages.analyze.report.plots",
    *LAZY_STAGE_MODULES[1:],
)


def resolve_parallel_jobs(config: DictConfig) -> int:
    """Fix `hydra.launcher.n_jobs` for this sweep and return it: as asked, or for -1, -2, ...
    no more than the cores free now. Linux shares CPU time between sessions (autogroup), so on
    a machine other sessions keep busy, jobs side by side only split this session's share
    and add the workers' start-up. The jobs read the fixed value for their thread share."""
    n_jobs = int(config.hydra.launcher.n_jobs)
    if n_jobs >= 0:
        return max(1, n_jobs)
    parallel, _ = sweep_share(n_jobs)
    parallel = min(parallel, free_cores(usable_cores(), runnable_elsewhere()))
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.launcher.n_jobs = parallel
    return parallel


def pool_shape(config: DictConfig, jobs: int | None = None) -> PoolShape:
    """Workers (no more than jobs), threads per job, and the modules each worker preloads."""
    parallel, threads = sweep_share(resolve_parallel_jobs(config))
    workers = parallel if jobs is None else max(1, min(parallel, jobs))
    tracking = TRACKER_MODULES if OmegaConf.select(config, "tracking.enabled") else ()
    stages = (spec.entry_module for spec in STAGES.values())
    return PoolShape(workers, threads, (ENTRY_MODULE, *stages, *LAZY_STAGE_MODULES, *tracking))


def start_early(config: DictConfig) -> None:
    """When this sweep uses the parallel launcher with several workers, start (and warm up)
    its workers now."""
    if OmegaConf.select(config, "hydra.launcher._target_") != LAUNCHER_TARGET:
        return
    shape = pool_shape(config)
    if shape.workers > 1:
        start_workers(shape)


def run_sweep_job(
    job: SweepJob,
    hydra_context: HydraContext,
    config: DictConfig,
    task_function: TaskFunction,
    singleton_state: dict[Any, Any],
) -> JobReturn:
    """In a worker: compose this job's config and run it as Hydra runs a sweep job."""
    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(job.overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{job.index}"
        sweep_config.hydra.job.num = job.index
        # As resolved for this sweep (the job's config is composed again from the overrides).
        sweep_config.hydra.launcher.n_jobs = config.hydra.launcher.n_jobs
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        config=sweep_config,
        task_function=task_function,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def launch_jobs(
    config: DictConfig,
    hydra_context: HydraContext,
    task_function: TaskFunction,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
) -> list[JobReturn]:
    """Run the jobs on the pool, in export-interleaved order; results in the sweep's order."""
    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    jobs = [SweepJob(initial_job_idx + i, tuple(o)) for i, o in enumerate(job_overrides)]
    ordered = interleave_export_groups(jobs, STAGES["export"].config_keys)
    shape = pool_shape(config, len(jobs))
    state = Singleton.get_state()
    if shape.workers == 1:  # as the basic launcher: no worker start-up to pay
        stop_workers()  # one started early for more jobs than there are
        # A search launches each trial alone and prints its own progress line per trial.
        level = logging.DEBUG if OmegaConf.select(config, "search.kind") else logging.INFO
        log.log(
            level, "sweep: %d job(s) one by one in this process (n_jobs resolved to 1)", len(jobs)
        )
        return [run_sweep_job(job, hydra_context, config, task_function, state) for job in jobs]
    log.info(
        "sweep: %d jobs on %d worker process(es) forked from a warm one, %d torch thread(s) each",
        len(jobs),
        shape.workers,
        shape.threads,
    )
    for job in ordered:
        log.info("\t#%d : %s", job.index, " ".join(filter_overrides(job.overrides)))
    threading.Thread(target=warm_up, args=(COMPARISON_MODULES,), daemon=True).start()
    try:
        pool = start_workers(shape)
        futures = {
            job.index: submit(pool, run_sweep_job, job, hydra_context, config, task_function, state)
            for job in ordered
        }
        results: list[JobReturn] = [unpickled(futures[job.index].result()) for job in jobs]
    except BaseException:
        stop_workers(cancel=True)  # Ctrl-C or a worker lost: no job starts any more
        raise
    stop_workers()
    return results


def warm_up(modules: Sequence[str]) -> None:
    """Import these now; one that fails is left to its user, which reports the error."""
    for name in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
