"""What one invocation logs to its tracking run: the run opened with the config, each stage's
status, metrics and files in one call, and the end (or no new run for an unchanged re-run)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from pipeline.outcomes import PipelineResult, StageOutcome, StageStatus
from pipeline.tracking.deferred import DeferredTracker
from pipeline.tracking.factory import PARENT_RUN_ENV, resolve_tracking_uri
from pipeline.tracking.mlflow_tracker import Tracker, git_commit
from pipeline.tracking.ui_links import view_hint
from pipeline.tracking.unchanged_runs import (
    invocation_key,
    remember_tracking_run,
    unchanged_tracking_run,
)


def start_tracking(
    tracker: DeferredTracker,
    cfg: DictConfig,
    run_dir: Path,
    names: Sequence[str],
    fault: str | None,
    *,
    now: bool = False,
) -> None:
    """Start the invocation's tracking run: its name, the config as params, the tags; held until
    the first stage that runs, unless `now` (this invocation ran its export already)."""
    tags = {
        "model": str(cfg.model.name),
        "backend": str(cfg.backend.name),
        "precision": str(cfg.backend.precision),
        "git_commit": git_commit(),
        "run_dir": str(run_dir),
        "stages": ",".join(names),
    }
    if fault:
        tags["fault_requested"] = fault  # `fault_injected` once the lower stage applied it
    container = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    run_name = (
        cfg.tracking.run_name or f"{cfg.model.name}-{cfg.backend.name}-{cfg.backend.precision}"
    )
    tracker.start(run_name, container, tags, OmegaConf.to_yaml(cfg, resolve=True))
    if now:
        tracker.begin()


def track_stage(
    tracker: Tracker,
    name: str,
    status: StageStatus,
    outcome: StageOutcome | None,
    produced: tuple[Mapping[str, float], Sequence[Path]],
    fault: str | None,
) -> None:
    """One stage's status tag; when it finished, its threads, its metrics and files
    (`produced`) and the fault tag."""
    tracker.set_tags({f"stage.{name}": status.value})
    if outcome is None:
        return
    if outcome.torch_threads is not None:
        tracker.log_params({f"torch_threads.{name}": str(outcome.torch_threads)})
    stage_metrics, files = produced
    metrics = {f"{name}.{k}": v for k, v in stage_metrics.items()}
    metrics[f"time.{name}_s"] = round(outcome.seconds, 3)  # the whole stage, wall clock
    tracker.log_metrics(metrics)
    if metrics.get("lower.fault_injected"):  # recorded only when a fault was applied
        tracker.set_tags({"fault_injected": fault or "yes"})
    tracker.log_artifacts(files, name)
    for path in files:
        if path.suffix == ".csv":
            tracker.log_table(path, f"tables/{path.stem}.json")


def end_tracking(
    tracker: Tracker,
    run_dir: Path,
    result: PipelineResult,
    *,
    failed: bool,
    error: str | None = None,
    killed: bool = False,
) -> None:
    """Log the run dir's log files, end the tracking run, note where it is."""
    for stream in logging.getLogger().handlers:
        if isinstance(stream, logging.FileHandler):
            stream.flush()
    try:
        tracker.log_artifacts(sorted(run_dir.glob("*.log")), "logs")
    except Exception:
        if not failed:  # when already failing, the first error is the one to report
            raise
    finally:
        tracker.finish(failed=failed, error=error, killed=killed)
        result.tracking, result.tracking_run_id = tracker.describe(), tracker.run_id


def finish_tracking(
    tracker: DeferredTracker, cfg: DictConfig, result: PipelineResult, own_tracker: bool
) -> None:
    """End tracking after every stage finished: no duplicate run for an unchanged re-run."""
    eligible = (
        own_tracker and cfg.tracking.enabled and cfg.cache and not os.environ.get(PARENT_RUN_ENV)
    )
    cache_dir = Path(cfg.cache_dir).expanduser().resolve()
    uri = resolve_tracking_uri(cfg.tracking)
    key = _invocation_key(cfg, result, uri) if eligible else ""
    reused = all(o.status == StageStatus.reused for o in result.stages)
    if eligible and reused and not cfg.tracking.log_unchanged and not tracker.begun:
        earlier = unchanged_tracking_run(cache_dir, key, uri)
        if earlier is not None:
            tracker.abandon()
            result.tracking_run_id = earlier
            result.tracking = (
                f"unchanged: MLflow run {earlier} in {uri} holds these results (same config, "
                "every stage reused; tracking.log_unchanged=true logs a new run); " + view_hint(uri)
            )
            return
    end_tracking(tracker, result.run_dir, result, failed=False)
    if eligible and result.tracking_run_id and getattr(tracker.inner, "uri", None) == uri:
        remember_tracking_run(cache_dir, key, uri, result.tracking_run_id, result.run_dir)


def _invocation_key(cfg: DictConfig, result: PipelineResult, uri: str) -> str:
    config = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    return invocation_key(config, [outcome.digest for outcome in result.stages], uri)
