"""Upload runs from a local fallback store to a tracking server (`pipeline.tools.sync`, sweeps).

Params, tags, full metric histories, artifacts and status are copied; a run synced once is tagged
`synced_to` in the source and skipped next time.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.tracking.mlflow_tracker import ensure_experiment

OFFLINE_STORE_DIR = "offline_mlflow"

SYNCED_TAG = "synced_to"
PARENT_TAG = "mlflow.parentRunId"
_NOT_COPIED = {PARENT_TAG, SYNCED_TAG}


@dataclass(frozen=True)
class SyncedRun:
    source_id: str
    target_id: str
    experiment: str


def sync_runs(source_uri: str, target_uri: str) -> list[SyncedRun]:
    """Copy every not-yet-synced finished run of every experiment of source to target."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    source, target = MlflowClient(source_uri), MlflowClient(target_uri)
    synced: list[SyncedRun] = []
    for experiment in source.search_experiments():
        runs = source.search_runs([experiment.experiment_id], max_results=5000)
        pending = [r for r in runs if SYNCED_TAG not in r.data.tags]
        if not pending:
            continue
        target_experiment = ensure_experiment(target_uri, experiment.name)
        for run in pending:
            tags = {k: v for k, v in run.data.tags.items() if k not in _NOT_COPIED}
            parent = run.data.tags.get(PARENT_TAG)
            if parent and _has_run(target, parent):  # a sweep job's parent, on the server
                tags[PARENT_TAG] = parent
            tags["synced_from"] = f"{source_uri}#{run.info.run_id}"
            created = target.create_run(
                target_experiment,
                start_time=run.info.start_time,
                tags=tags,
                run_name=run.info.run_name,
            )
            new_id = created.info.run_id
            params = [Param(k, v) for k, v in run.data.params.items()]
            for start in range(0, len(params), 100):
                target.log_batch(new_id, params=params[start : start + 100])
            metrics = [
                Metric(m.key, m.value, m.timestamp, m.step)
                for key in run.data.metrics
                for m in source.get_metric_history(run.info.run_id, key)
            ]
            for start in range(0, len(metrics), 1000):
                target.log_batch(new_id, metrics=metrics[start : start + 1000])
            with tempfile.TemporaryDirectory() as scratch:
                local = source.download_artifacts(run.info.run_id, "", scratch)
                for child in sorted(Path(local).iterdir()):
                    if child.is_dir():
                        target.log_artifacts(new_id, str(child), child.name)
                    else:
                        target.log_artifact(new_id, str(child))
            target.set_terminated(new_id, status=run.info.status, end_time=run.info.end_time)
            source.log_batch(run.info.run_id, tags=[RunTag(SYNCED_TAG, f"{target_uri}#{new_id}")])
            synced.append(SyncedRun(run.info.run_id, new_id, experiment.name))
    return synced


def _has_run(client: Any, run_id: str) -> bool:
    """Whether the store behind `client` holds a run with this id."""
    from mlflow.exceptions import MlflowException

    try:
        client.get_run(run_id)
    except MlflowException:
        return False
    return True


def sync_sweep_jobs(sweep_dir: Path, target_uri: str) -> list[SyncedRun]:
    """Upload the fallback stores of a sweep's jobs (server unreachable when they started)."""
    synced: list[SyncedRun] = []
    for store in sorted(sweep_dir.glob(f"*/{OFFLINE_STORE_DIR}/mlflow.db")):
        synced += sync_runs(f"sqlite:///{store.resolve()}", target_uri)
    return synced
