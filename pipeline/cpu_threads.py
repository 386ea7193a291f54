"""Torch's CPU threads on a shared machine: waiting threads sleep, and only free cores are used.

On a busy machine torch's OpenMP threads spin-waiting against each other and against other
processes multiplied the analyze stage's CPU time by 4 (benchmarks/RESULTS.md).
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


def limit_threads(threads: int) -> None:
    """An upper bound for later choices (parallel sweep jobs split the cores)."""
    global _ceiling
    _ceiling = max(1, threads)


def use_free_cores() -> int | None:
    """Set torch's intra-op threads to the cores free now; None if $OMP_NUM_THREADS decides."""
    if os.environ.get(THREADS_ENV):
        return None
    import torch  # only when a stage really runs, so --help and reused runs stay light

    cores = usable_cores() if _ceiling is None else min(usable_cores(), _ceiling)
    threads = free_cores(cores, runnable_elsewhere())
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
        log.debug("torch uses %d thread(s) (%d usable core(s))", threads, cores)
    return threads
