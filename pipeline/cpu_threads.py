"""Torch's CPU threads on a shared machine: waiting threads sleep; untimed stages use the free
cores, the timed run stage every core it is allotted (its timings stay comparable).

On a busy machine torch's OpenMP threads spin-wait against each other and against other
processes; passive waiting and a thread count that fits the free cores avoid that.
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from pathlib import Path

log = logging.getLogger("pipeline")

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
THREADS_ENV = "OMP_NUM_THREADS"
LOADAVG = Path("/proc/loadavg")
SAMPLES = 5
SAMPLE_GAP_S = 0.004

_ceiling: int | None = None


def set_passive_wait_policy() -> None:
    """Before torch loads OpenMP: idle worker threads sleep instead of spinning (unless set)."""
    os.environ.setdefault(WAIT_POLICY_ENV, "PASSIVE")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def runnable_elsewhere(loadavg: Path = LOADAVG) -> int | None:
    """Threads other than this one that want a CPU right now (median of a few /proc reads)."""
    counts: list[int] = []
    for _ in range(SAMPLES):
        try:
            running = loadavg.read_text().split()[3].split("/")[0]
            counts.append(int(running) - 1)  # the reading thread counts itself
        except (OSError, IndexError, ValueError):
            return None
        time.sleep(SAMPLE_GAP_S)
    return max(0, int(statistics.median(counts)))


def free_cores(cores: int, busy: int | None) -> int:
    """Cores left when `busy` other threads run on `cores` cores (unknown load: all), at least 1."""
    if busy is None:
        return cores
    return max(1, min(cores, cores - busy))


def sweep_share(n_jobs: int) -> tuple[int, int]:
    """(parallel jobs, torch threads per job) for a sweep launcher's `n_jobs` (joblib's rule:
    -1 is every usable core, -2 all but one, ...), so jobs × threads never exceeds the cores."""
    cores = usable_cores()
    parallel = max(1, cores + 1 + n_jobs) if n_jobs < 0 else max(1, n_jobs)
    return parallel, max(1, cores // min(parallel, cores))


def limit_threads(threads: int) -> None:
    """An upper bound for later choices (parallel sweep jobs split the cores)."""
    global _ceiling
    _ceiling = max(1, threads)


def env_threads() -> int | None:
    """The thread count $OMP_NUM_THREADS sets (torch reads it at import), or None."""
    try:
        return max(1, int(os.environ.get(THREADS_ENV, "")))
    except ValueError:
        return None


def choose_threads(timed: bool = False) -> int:
    """Torch's intra-op threads for the next stage: $OMP_NUM_THREADS, else for a timed stage
    every core it is allotted (so its timings compare across runs, whatever the load), else
    the cores free now."""
    from_env = env_threads()
    if from_env is not None:
        return from_env
    cores = usable_cores() if _ceiling is None else min(usable_cores(), _ceiling)
    return cores if timed else free_cores(cores, runnable_elsewhere())


def apply_threads(threads: int) -> None:
    """Make torch use `threads` intra-op threads (no-op when $OMP_NUM_THREADS decides)."""
    if env_threads() is not None:
        return
    import torch  # only when a stage really runs, so --help and reused runs stay light

    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
        log.debug("torch uses %d thread(s)", threads)
