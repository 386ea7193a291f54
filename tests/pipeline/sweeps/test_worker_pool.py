"""The parallel sweep's worker pool: workers forked warm, reused across jobs, thread counts set
before anything loads, and nothing left running once it is stopped."""

from __future__ import annotations

import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import sys
from pathlib import Path

import pytest

from pipeline.sweeps.worker_pool import PoolShape, start_workers, stop_workers, submit, unpickled

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="fork server and /proc (Linux)"
)

PRELOADED = "wave"  # a stdlib module neither pytest nor the pipeline imports


def worker_facts(module: str) -> tuple[int, bool, str | None]:
    """In a worker: its pid, whether `module` was loaded before this job, its OpenMP threads."""
    return os.getpid(), module in sys.modules, os.environ.get("OMP_NUM_THREADS")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_start_warm_are_reused_across_jobs_and_end_with_the_pool() -> None:
    assert PRELOADED not in sys.modules
    shape = PoolShape(workers=2, threads=1, modules=(PRELOADED,))
    pool = start_workers(shape)
    try:
        assert start_workers(shape) is pool  # the same sweep asks again: the same pool
        futures = [submit(pool, worker_facts, PRELOADED) for _ in range(6)]
        facts = [unpickled(f.result(timeout=120)) for f in futures]
        server = multiprocessing.forkserver._forkserver._forkserver_pid
        tracker = multiprocessing.resource_tracker._resource_tracker._pid
    finally:
        stop_workers()
    pids = {pid for pid, _, _ in facts}
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids  # six jobs, two processes at most
    assert all(loaded for _, loaded, _ in facts)  # loaded once, in the fork server
    assert {threads for _, _, threads in facts} == {os.environ.get("OMP_NUM_THREADS", "1")}
    assert PRELOADED not in sys.modules  # loaded there, not here
    # At the moment stop_workers returns, with no grace period: the workers, the fork server
    # and the resource tracker the fork server started are all gone.
    assert tracker is not None
    assert [pid for pid in [*pids, server, tracker] if alive(pid)] == []


def test_functions_travel_by_value_both_ways() -> None:
    """Hydra's task function is not importable by name; cloudpickle sends closures too."""
    offset = 40
    pool = start_workers(PoolShape(workers=1, threads=1, modules=()))
    try:
        result = unpickled(submit(pool, lambda x: lambda: x + offset, 2).result(timeout=120))
    finally:
        stop_workers()
    assert result() == 42
