"""Team mode on PostgreSQL: `mlflow server` on a real PostgreSQL, parallel sweeps logging at once,
and the server restarted in the middle of one. Nothing a job logs may be lost."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.cli_runner import REPO
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.postgres import running_postgres

pytestmark = [pytest.mark.server, pytest.mark.e2e, pytest.mark.timeout(900)]

ITERATIONS = [str(n) for n in range(3, 11)]  # one job per value: 8 jobs of the same shape
# What every child run must hold, whatever else it logs.
REQUIRED_ARTIFACTS = {"analyze/report.html", "analyze/summary.json", "tables/events.json"}


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("needs a PostgreSQL driver: pip install -e '.[team]'")
    with running_postgres() as database_uri:
        server = MlflowServer(database_uri, tmp_path_factory.mktemp("team_server"))
        server.start()
        yield server
        server.stop()


def _sweep_command(tmp_path: Path, server: MlflowServer, experiment: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipeline",
        "-m",
        "model=mlp",
        "backend=xnnpack",
        f"runtime.iterations={','.join(ITERATIONS)}",
        "runtime.warmup=0",
        "runtime.max_time_s=null",  # the iteration counts the test checks, whatever the load
        f"tracking.uri={server.uri}",
        f"tracking.experiment={experiment}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cache_dir={tmp_path / 'cache'}",
        *extra,
    ]


def _popen_sweep(command: list[str], tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    with (tmp_path / "sweep.out").open("w") as out:
        return subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=out)


def _artifact_paths(client: MlflowClient, run_id: str, path: str = "") -> set[str]:
    found: set[str] = set()
    for item in client.list_artifacts(run_id, path or None):
        found |= _artifact_paths(client, run_id, item.path) if item.is_dir else {item.path}
    return found


def _assert_nothing_lost(client: MlflowClient, experiment_name: str) -> list[Any]:
    """One finished parent, a finished child per job, each child complete and alike."""
    experiment = client.get_experiment_by_name(experiment_name)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep") == "parent"]
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["sweep.jobs"] == len(ITERATIONS)
    assert "comparison/comparison_runs.csv" in _artifact_paths(client, parent.info.run_id)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == len(runs) - 1 == len(ITERATIONS)
    assert all(c.info.status == "FINISHED" for c in children)
    # Each job's own values arrived in its own run.
    assert sorted(c.data.params["runtime.iterations"] for c in children) == sorted(ITERATIONS)
    for child in children:
        assert child.data.metrics["run.iterations"] == float(
            child.data.params["runtime.iterations"]
        )
    # Every run holds the same params, metrics, tags and artifacts (tables included).
    shapes = {
        (
            frozenset(c.data.params),
            frozenset(c.data.metrics),
            frozenset(k for k in c.data.tags if not k.startswith(("process.", "synced_"))),
            frozenset(_artifact_paths(client, c.info.run_id)),
        )
        for c in children
    }
    assert len(shapes) == 1, shapes
    (_, metrics, _, artifacts) = shapes.pop()
    assert artifacts >= REQUIRED_ARTIFACTS, artifacts
    assert any(p.startswith("logs/") for p in artifacts) and len(metrics) >= 20
    return children


def test_parallel_sweep_logs_everything(team_server: MlflowServer, tmp_path: Path) -> None:
    """8 jobs at once, each logging through its own client to the server."""
    sweep = _popen_sweep(
        _sweep_command(tmp_path, team_server, "pg-parallel", "hydra.launcher.n_jobs=8"), tmp_path
    )
    assert sweep.wait(timeout=800) == 0, (tmp_path / "sweep.out").read_text()[-3000:]
    children = _assert_nothing_lost(MlflowClient(team_server.uri), "pg-parallel")
    assert not any("synced_from" in c.data.tags for c in children)  # all logged live


def _wait_for(condition: Callable[[], bool], sweep: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 600
    while not condition():
        assert sweep.poll() is None, f"the sweep ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.5)


def _runs(client: MlflowClient, experiment_name: str) -> list[Any]:
    experiment = client.get_experiment_by_name(experiment_name)
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


@pytest.mark.parametrize("moment", ["while_jobs_log", "as_jobs_start"])
def test_server_restart_mid_sweep_loses_nothing(
    team_server: MlflowServer, tmp_path: Path, moment: str
) -> None:
    """Down while jobs log: their MLflow clients retry until it is back. Down as jobs start:
    they log to their run dir and the sweep uploads them under its parent when it ends."""
    client, experiment = MlflowClient(team_server.uri), f"pg-restart-{moment}"
    sweep = _popen_sweep(_sweep_command(tmp_path, team_server, experiment), tmp_path)
    if moment == "while_jobs_log":
        _wait_for(
            lambda: any(r.data.tags.get("sweep") != "parent" for r in _runs(client, experiment)),
            sweep,
            "a job logged",
        )
        team_server.stop()
        time.sleep(5)  # jobs keep going while nothing answers
    else:
        _wait_for(lambda: bool(_runs(client, experiment)), sweep, "the parent run existed")
        team_server.stop()
        _wait_for(
            lambda: any((tmp_path / "sweep").glob("*/offline_mlflow")), sweep, "a job fell back"
        )
    team_server.start()
    assert sweep.poll() is None, "the sweep must still be running when the server is back"
    assert sweep.wait(timeout=800) == 0, (tmp_path / "sweep.out").read_text()[-3000:]
    children = _assert_nothing_lost(client, experiment)
    synced = [c for c in children if "synced_from" in c.data.tags]
    output = (tmp_path / "sweep.out").read_text()
    if moment == "while_jobs_log":
        assert "Retrying" in output and len(synced) < len(children)  # some logged through it
    else:
        assert synced and "uploaded now" in output  # fell back, then uploaded under the parent
