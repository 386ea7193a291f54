"""A sweep through `hydra/launcher=submitit_slurm` on a real SLURM cluster (.ci/slurm_up.sh)."""

from __future__ import annotations

import csv
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.tracking.factory import PARENT_RUN_ENV
from tests.helpers.cli_runner import run_module
from tests.helpers.optional import require_slurm_cluster


def _scheduler_records(array_id: str) -> dict[str, tuple[str, str]]:
    """{job id: (state, node)} for the array's jobs, from SLURM's accounting (`sacct`)."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-j", array_id, "-o", "JobID,State,NodeList", "--parsable2"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return {j: (s, n) for j, s, n in (line.split("|") for line in out.splitlines() if line)}


def _settled_records(array_id: str, jobs: int, polls: int = 120) -> dict[str, tuple[str, str]]:
    """The array's records once every job has left PENDING/RUNNING/COMPLETING.

    submitit hands back a job's result as soon as the job writes it; the job's process then exits
    and SLURM's accounting records the end a moment later, so the first look can still say RUNNING.
    """
    records = _scheduler_records(array_id)
    for _ in range(polls):
        states = {state for state, _ in records.values()}
        if len(records) == jobs and not states & {"PENDING", "RUNNING", "COMPLETING"}:
            break
        time.sleep(0.5)
        records = _scheduler_records(array_id)
    return records


@pytest.mark.e2e
def test_submitit_slurm_sweep_runs_as_slurm_jobs(tmp_path: Path) -> None:
    require_slurm_cluster()
    # three_inputs has no node linear_2: its lower stage fails; the mlp job must finish.
    result = run_module(
        "pipeline",
        "-m",
        "model=mlp,three_inputs",
        "backend=xnnpack",
        "backend.fault.node=linear_2",
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.timeout_min=10",
        # As on clusters whose jobs start with a clean environment: the parent run id set by
        # the sweep command does not reach the jobs (they get it from the sweep callback).
        f"hydra.launcher.setup=['unset {PARENT_RUN_ENV}']",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "1 sweep job(s) failed: three_inputs/xnnpack" in output, output[-3000:]
    # Accounting answers submitit's polls: no warning per poll.
    assert "sacct error" not in output and "accounting storage is disabled" not in output

    # The scheduler ran them: submitit's job dirs are SLURM array tasks that sacct knows.
    submitit_dir = tmp_path / "sweep" / ".submitit"
    job_dirs = sorted(p.name for p in submitit_dir.iterdir() if p.is_dir() and "_" in p.name)
    assert len(job_dirs) == 2, job_dirs
    array_id = job_dirs[0].split("_")[0]
    records = _settled_records(array_id, len(job_dirs))
    assert set(records) == set(job_dirs), records
    assert {state for state, _ in records.values()} == {"COMPLETED"}, records
    for job in job_dirs:  # each job's pipeline log went to its SLURM job's output
        log = (submitit_dir / job / f"{job}_0_log.out").read_text()
        assert "[export]" in log, log[-2000:]

    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("delegate-debugger")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    status = {c.data.tags["model"]: c.info.status for c in children}
    assert status == {"mlp": "FINISHED", "three_inputs": "FAILED"}
    assert parent.info.status == "FAILED" and parent.data.metrics["sweep.failed_jobs"] == 1
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "comparison")}
    assert "comparison/comparison_runs.csv" in logged
    rows = list(csv.DictReader((tmp_path / "sweep" / "comparison" / "comparison_runs.csv").open()))
    assert {(r["model"], r["status"]) for r in rows} == {
        ("mlp", "FINISHED"),
        ("three_inputs", "FAILED"),
    }
