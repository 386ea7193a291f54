"""The selected stages in order, each reused or run (pipeline.flow.stage_step) and tracked in one call
whether it finished, failed or was interrupted."""

from __future__ import annotations

import dataclasses
import logging

from pipeline.errors import StageFailedError, StageSelectionError
from pipeline.flow.op_names_preflight import Preflight
from pipeline.flow.run_plan import RunPlan
from pipeline.flow.stage_step import StageRun, run_stage
from pipeline.log_files import log_traceback_to_files
from pipeline.outcomes import PipelineResult, StageStatus
from pipeline.tracking.deferred import DeferredTracker
from pipeline.tracking.invocation_tracking import track_stage

log = logging.getLogger("pipeline")

PREFLIGHT_EXPORT = "run before the other stages: the options name ops of its program"


def _stage(name: str, plan: RunPlan, preflight: Preflight, tracker: DeferredTracker) -> StageRun:
    """Reuse or run one stage; the export the op-name check ran is reported as done here."""
    ran = preflight.export if name == "export" else None
    if name == "export":  # the preflight's cache (its own under cache=false) holds it
        plan = dataclasses.replace(plan, cache=preflight.export_cache)
    run = run_stage(plan, name, tracker.begin)
    if ran is None:
        return run
    seconds = ran.seconds + run.outcome.seconds
    done = dataclasses.replace(
        run.outcome, status=StageStatus.done, seconds=seconds, reason=PREFLIGHT_EXPORT
    )
    return dataclasses.replace(run, outcome=done)


def run_stages(
    plan: RunPlan, preflight: Preflight, tracker: DeferredTracker, result: PipelineResult
) -> None:
    """Each stage of the plan in order into `result`, tracked whatever its end."""
    for index, name in enumerate(plan.stages, start=1):
        log.debug("[%d/%d] %s", index, len(plan.stages), name)
        run, status = None, StageStatus.failed
        try:
            run = _stage(name, plan, preflight, tracker)
        except StageSelectionError:
            raise
        except Exception as exc:
            log_file = log_traceback_to_files(f"stage {name} failed")  # not the terminal
            raise StageFailedError(name, exc, plan.resume, log_file) from exc
        except KeyboardInterrupt:
            status = StageStatus.interrupted
            raise
        finally:
            if run is not None:
                result.stages.append(run.outcome)
                status = run.outcome.status
            produced = (run.metrics, run.files) if run is not None else ({}, [])
            outcome = run.outcome if run is not None else None
            track_stage(tracker, name, status, outcome, produced, plan.fault)
