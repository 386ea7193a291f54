"""A planned invocation under tracking: the run dir and its log file, the tracking run opened,
the stages (pipeline.flow.stage_loop), the end of tracking (or none for an unchanged re-run), the
summary; Ctrl-C still ends the tracking run and prints the command that resumes."""

from __future__ import annotations

import gc
import logging
import signal
import threading

from pipeline.errors import RunInterruptedError
from pipeline.flow.op_names_preflight import Preflight
from pipeline.flow.run_plan import RunPlan
from pipeline.flow.stage_loop import run_stages
from pipeline.flow.stage_step import check_inputs
from pipeline.log_files import attach_log_file
from pipeline.outcomes import PipelineResult
from pipeline.terminal_summary import format_summary
from pipeline.tracking.deferred import DeferredTracker
from pipeline.tracking.factory import make_tracker
from pipeline.tracking.invocation_tracking import (
    end_tracking,
    finish_tracking,
    start_tracking,
)
from pipeline.tracking.mlflow_tracker import Tracker

log = logging.getLogger("pipeline")


def run_tracked(
    plan: RunPlan, preflight: Preflight, tracker: Tracker | None, print_summary: bool
) -> PipelineResult:
    """The stages of a checked plan under tracking; the summary printed when asked."""
    run_dir = plan.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    check_inputs(plan, plan.stages[0])  # before a tracking run exists: none for a typo
    own_tracker = tracker is None
    # First: a tracking process starts importing MLflow while the stages run.
    deferred = DeferredTracker(tracker or make_tracker(plan.cfg.tracking, run_dir))
    handler = attach_log_file(run_dir)
    result = PipelineResult(run_dir=run_dir)
    previous_sigint = None
    try:
        ran_export = preflight.export is not None  # the op-name check ran it for this run
        start_tracking(deferred, plan.cfg, run_dir, plan.stages, plan.fault, now=ran_export)
        run_stages(plan, preflight, deferred, result)
    except KeyboardInterrupt:
        if threading.current_thread() is threading.main_thread():  # signals: main thread only
            # A second Ctrl-C must not cut the bookkeeping short.
            previous_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
        error = "interrupted by the user (Ctrl-C)"
        end_tracking(deferred, run_dir, result, failed=True, error=error, killed=True)
        raise RunInterruptedError(plan.resume) from None
    except BaseException as exc:
        end_tracking(deferred, run_dir, result, failed=True, error=f"{type(exc).__name__}: {exc}")
        raise
    else:
        finish_tracking(deferred, plan.cfg, result, own_tracker)
    finally:
        gc.unfreeze()  # frozen objects become collectable again (a sweep runs many invocations)
        if handler is not None:
            logging.getLogger().removeHandler(handler)
            handler.close()
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
    if print_summary:
        print(format_summary(result), flush=True)
    return result
