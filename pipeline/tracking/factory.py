"""Pick the tracker for a run: MLflow at the configured URI, a local fallback, or none."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from omegaconf import DictConfig

from pipeline.tracking import store
from pipeline.tracking.mlflow_tracker import MlflowTracker, NullTracker, Tracker, server_reachable
from pipeline.tracking.offline_sync import OFFLINE_STORE_DIR
from pipeline.tracking.process import TrackerProcess

log = logging.getLogger("pipeline")

PARENT_RUN_ENV = "PIPELINE_PARENT_RUN_ID"


def resolve_tracking_uri(tracking: DictConfig) -> str:
    """The store of the `tracking` config group (`pipeline.tracking.store.resolve_tracking_uri`)."""
    return store.resolve_tracking_uri(tracking.uri)


def offline_store(run_dir: Path) -> tuple[str, str]:
    """(tracking uri, artifact root) of the local store a run falls back to."""
    base = (run_dir / OFFLINE_STORE_DIR).resolve()
    base.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{base / 'mlflow.db'}", (base / "artifacts").as_uri()


def make_tracker(tracking: DictConfig, run_dir: Path) -> Tracker:
    """The tracker for this run; an unreachable server falls back to a store in the run dir."""
    if not tracking.enabled:
        return NullTracker()
    uri = resolve_tracking_uri(tracking)
    parent = os.environ.get(PARENT_RUN_ENV) or None
    artifact_root = store.artifact_root_for(uri)
    if not server_reachable(uri):
        if not tracking.fallback_to_local:
            raise ConnectionError(
                f"tracking server {uri} is unreachable (tracking.uri). Start it, or set "
                "tracking.fallback_to_local=true to log locally and upload later."
            )
        local_uri, local_root = offline_store(run_dir)
        log.warning(
            "tracking server %s is unreachable: logging this run to %s instead. Upload it later "
            "with: python -m pipeline.tools.sync --from %s --to %s",
            uri,
            local_uri,
            local_uri,
            uri,
        )
        # A sweep job keeps its parent's id: syncing links it to the parent on the server.
        return _mlflow_tracker(tracking, local_uri, parent, local_root)
    return _mlflow_tracker(tracking, uri, parent, artifact_root)


def _mlflow_tracker(
    tracking: DictConfig, uri: str, parent: str | None, root: str | None
) -> Tracker:
    """An MlflowTracker in a child process, so its import and store set-up overlap the stages;
    in this process when MLflow is loaded here already (a sweep's launcher, a notebook, tests)."""
    experiment, max_length = str(tracking.experiment), int(tracking.max_param_length)
    if "mlflow" in sys.modules:
        return MlflowTracker(uri, experiment, max_length, parent, root)
    settings = {
        "uri": uri,
        "experiment": experiment,
        "max_param_length": max_length,
        "parent_run_id": parent,
        "artifact_root": root,
    }
    return TrackerProcess(settings)
