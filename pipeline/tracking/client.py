"""MlflowClient behind small functions, so tools and the sweep callback never import mlflow."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineError
from pipeline.tracking.dependency_logs import quiet_dependency_logs
from pipeline.tracking.mlflow_tracker import local_artifact_dir

# What a process that will track runs can import ahead (a sweep's warm workers): MLflow's client
# and its SQL store, seconds of CPU on first use.
TRACKER_MODULES = ("mlflow.tracking", "mlflow.store.tracking.sqlalchemy_store")


class RunNotFoundError(PipelineError):
    """The store has no run with the id asked for."""


def tracking_client(uri: str) -> Any:
    """An MlflowClient on the store at `uri` (no global fluent state)."""
    from mlflow.tracking import MlflowClient

    quiet_dependency_logs()
    return MlflowClient(tracking_uri=uri)


def log_metric_values(
    client: Any, run_id: str, metrics: Mapping[str, float], step: int = 0
) -> None:
    """Log these metrics, stamped now, in one batch."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    items = [Metric(key, float(value), now, step) for key, value in metrics.items()]
    client.log_batch(run_id, metrics=items)


def download_run_dirs(uri: str, run_id: str, names: Iterable[str], target: Path) -> Path:
    """Download the named top-level artifact dirs a run has into `target`; `target`."""
    from mlflow.exceptions import MlflowException

    client = tracking_client(uri)
    try:
        present = {a.path for a in client.list_artifacts(run_id)}
    except MlflowException as exc:
        raise RunNotFoundError(f"MLflow run {run_id} not found in {uri} (--uri): {exc}") from exc
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        if name in present:
            client.download_artifacts(run_id, name, str(target))
    return target


def runs_logged_from(uri: str, run_dirs: Iterable[Path]) -> list[Any]:
    """The MLflow runs tagged with one of these run dirs (`run_dir` tag)."""
    wanted = {str(p) for p in run_dirs}
    if not wanted:
        return []
    client = tracking_client(uri)
    return [
        run
        for experiment in client.search_experiments()
        for run in client.search_runs([experiment.experiment_id], max_results=50_000)
        if run.data.tags.get("run_dir") in wanted
    ]


def delete_runs_logged_from(uri: str, run_dirs: Iterable[Path]) -> int:
    """Delete the MLflow runs tagged with one of these run dirs, and their local artifact dirs."""
    runs = runs_logged_from(uri, run_dirs)
    client = tracking_client(uri)
    for run in runs:
        artifacts = local_artifact_dir(run.info.artifact_uri)
        if artifacts is not None and artifacts.is_dir():
            shutil.rmtree(artifacts.parent if artifacts.name == "artifacts" else artifacts)
        client.delete_run(run.info.run_id)
    return len(runs)
