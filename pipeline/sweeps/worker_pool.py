"""The worker processes of a parallel sweep: forked from one warm process, reused by every job,
and ended before the sweep command returns.

Loading torch, torch.export's tracer, the stages, matplotlib and MLflow costs seconds of CPU per
process. A fork server loads them once, early (beside the sweep parent's MLflow set-up), and
each worker is a fork of it, so a 2-worker sweep pays that once, as the one-by-one sweep does.
Its thread counts are set in its environment before anything loads OpenMP or BLAS, so
jobs × threads never exceeds the cores.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("pipeline")

# Thread pools a job's libraries size from the environment at import (OpenMP: torch; BLAS: numpy).
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class PoolShape:
    """What a pool is started with; a pool of another shape is not reused."""

    workers: int
    threads: int
    modules: tuple[str, ...]


_pool: ProcessPoolExecutor | None = None
_shape: PoolShape | None = None


def worker_env(threads: int) -> dict[str, str]:
    """Thread counts for the workers; a value the user set in this environment is kept."""
    return {name: os.environ.get(name, str(threads)) for name in THREAD_ENV_VARS}


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """These environment variables while a child process is started (it copies them)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def start_workers(shape: PoolShape) -> ProcessPoolExecutor:
    """The sweep's pool of this shape. Its fork server starts loading `shape.modules` now, in
    the background; the workers are forked from it when jobs are submitted."""
    global _pool, _shape
    if _pool is not None and _shape == shape:
        return _pool
    stop_workers()
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(shape.modules))
    with _environment(worker_env(shape.threads)):
        multiprocessing.forkserver.ensure_running()  # returns at once; the loading goes on
    _pool = ProcessPoolExecutor(max_workers=shape.workers, mp_context=context)
    _shape = shape
    log.debug("sweep: fork server loading %d module(s)", len(shape.modules))
    return _pool


def submit(pool: ProcessPoolExecutor, function: Callable[..., Any], *args: Any) -> Future[bytes]:
    """Run `function(*args)` on the pool, both ways through cloudpickle (Hydra's task function
    and config classes are not importable by name, so plain pickle cannot send them);
    `unpickled(future.result())` is the return value."""
    return pool.submit(_call_pickled, _dumps((function, args)))


def unpickled(payload: bytes) -> Any:
    """A value `submit`'s worker sent back."""
    return pickle.loads(payload)  # cloudpickle writes plain pickle streams


def _dumps(value: Any) -> bytes:
    import cloudpickle

    return bytes(cloudpickle.dumps(value))


def _call_pickled(payload: bytes) -> bytes:
    function, args = pickle.loads(payload)
    return _dumps(function(*args))


def stop_workers(cancel: bool = False) -> None:
    """End the pool's workers, then its fork server, and wait for them (`cancel`: kill the jobs
    running and drop those not started), so nothing of the sweep outlives it."""
    global _pool, _shape
    pool, _pool, _shape = _pool, None, None
    if pool is not None:
        if cancel:
            _kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=cancel)
    _end_fork_server()
    _end_resource_tracker()


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Stop the jobs running now: a Ctrl-C reaches them too, a signal to the sweep alone not."""
    kill = getattr(pool, "kill_workers", None)  # Python >= 3.14
    if kill is not None:
        kill()
        return
    for process in list(getattr(pool, "_processes", {}).values()):
        with contextlib.suppress(Exception):
            process.kill()


def _end_fork_server() -> None:
    """Kill the fork server and reap it: closing its pipe makes it exit by unloading torch and
    MLflow, seconds of CPU for nothing. (CPython's ForkServer has no public stop; these are the
    attributes its own tests use. Without them it ends when this process exits.)"""
    server = multiprocessing.forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    stop = getattr(server, "_stop", None)
    if pid is None or stop is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    stop()  # closes its pipe, waits for the pid, removes its socket


def _end_resource_tracker() -> None:
    """Stop multiprocessing's resource tracker (the fork server started it) and reap it: left
    alone, it ends only after this process has exited, outliving the command. `_stop` is what
    CPython's own tests call (3.11-3.13); a later sweep starts a new one when it needs it."""
    import multiprocessing.resource_tracker as resource_tracker

    tracker = resource_tracker._resource_tracker
    stop = getattr(tracker, "_stop", None)
    if stop is None or getattr(tracker, "_pid", None) is None:
        return
    with contextlib.suppress(OSError, ChildProcessError):
        stop()
