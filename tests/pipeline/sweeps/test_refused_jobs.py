"""A sweep job refused before any stage (an op name its model lacks) opens no run of its own: the
sweep's callback records it as a FAILED child run, so MLflow shows every combination."""

from __future__ import annotations

import csv
from pathlib import Path

from mlflow.tracking import MlflowClient

from pipeline.sweeps.callback import SweepTracking
from pipeline.sweeps.job_failures import FailedJob, record_failed_job
from pipeline.tracking.client import tracking_client
from pipeline.tracking.mlflow_tracker import ensure_experiment
from pipeline.tracking.store import artifact_root_for


def test_a_refused_job_becomes_a_failed_child_run_and_counts(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = SweepTracking()
    sweep.uri = uri
    sweep.experiment_id = ensure_experiment(uri, "refused", artifact_root_for(uri))
    sweep.client = tracking_client(uri)
    parent = sweep.client.create_run(sweep.experiment_id, tags={"sweep": "parent"}).info.run_id
    sweep_dir = tmp_path / "sweep"
    refused = FailedJob(
        "three_inputs", "xnnpack", "backend.fault.node: no op linear_2", "fp32", True
    )
    record_failed_job(sweep_dir / "1", refused)
    # A job that failed in a stage has its own (tracked) child run: no second one for it.
    record_failed_job(sweep_dir / "0", FailedJob("mlp", "qnn", "lower failed", "fp32", False))

    sweep._record_refused_jobs(parent, sweep_dir)
    failed = sweep._finish_parent(parent, sweep_dir, True, [], quiet=True)

    client = MlflowClient(uri)
    runs = client.search_runs([sweep.experiment_id])
    (child,) = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent]
    assert child.info.status == "FAILED"
    assert child.data.tags["error"] == refused.error
    assert (child.data.tags["model"], child.data.tags["precision"]) == ("three_inputs", "fp32")
    assert failed == ["three_inputs/xnnpack"]
    assert client.get_run(parent).data.metrics["sweep.failed_jobs"] == 1
    rows = list(csv.DictReader((sweep_dir / "comparison" / "comparison_runs.csv").open()))
    assert [(r["model"], r["status"]) for r in rows] == [("three_inputs", "FAILED")]
