"""`python -m pipeline.tools.sync --from sqlite:///RUN_DIR/offline_mlflow/mlflow.db --to http://host:port`

Uploads runs logged to a local fallback store (tracking server unreachable at the time) to the
server: params, tags, full metric histories, artifacts and status. A run synced once is tagged
`synced_to` in the source and skipped next time, so the command can be repeated safely.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.tracking.mlflow_tracker import ensure_experiment, server_reachable
from pipeline.tracking.store import sqlite_database

SYNCED_TAG = "synced_to"
_NOT_COPIED = {"mlflow.parentRunId", SYNCED_TAG}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.tools.sync", description=__doc__)
    parser.add_argument("--from", dest="source", required=True, help="the local store's URI")
    parser.add_argument("--to", dest="target", required=True, help="the tracking server's URI")
    args = parser.parse_args(argv)
    source_db = sqlite_database(args.source)
    if source_db is not None and not source_db.is_file():
        print(f"error: --from {args.source}: no such store file", file=sys.stderr)
        return 1
    if not server_reachable(args.target):
        print(
            f"error: --to {args.target} is unreachable; start the server and retry", file=sys.stderr
        )
        return 1
    synced = sync_runs(args.source, args.target)
    for run in synced:
        print(f"synced run {run.source_id} -> {run.target_id} (experiment {run.experiment})")
    print(f"{len(synced)} run(s) uploaded to {args.target}" if synced else "nothing to sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
