"""Team mode against a real `mlflow server` on 127.0.0.1; an unreachable server, then sync."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from pipeline.tools.sync import main as sync_main
from tests.helpers.cli_runner import run_module
from tests.helpers.configs import compose_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real server: sqlite backend store, proxied artifacts, one worker, job execution off."""
    root = tmp_path_factory.mktemp("mlflow_server")
    port = _free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'server.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env=env,
        stdout=(root / "server.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
        if server.poll() is not None:
            pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-3000:]}")
    else:
        server.kill()
        pytest.fail(
            f"mlflow server not ready in 180 s: {(root / 'server.log').read_text()[-3000:]}"
        )
    yield uri
    server.terminate()
    server.wait(timeout=30)


def _run(tmp_path: Path, *overrides: str) -> Path:
    cfg = compose_config(tmp_path, ["model=mlp", "backend=xnnpack", *overrides])
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    run_pipeline(cfg, print_summary=False)
    return Path(cfg.run_dir)


def test_pipeline_logs_to_the_server(mlflow_server: str, tmp_path: Path) -> None:
    _run(tmp_path, f"tracking.uri={mlflow_server}", "tracking.experiment=server-single")
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("server-single")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.data.metrics["analyze.verdict_pass"] == 1.0
    paths = {a.path for a in client.list_artifacts(run.info.run_id, "analyze")}
    assert "analyze/report.html" in paths
    local = client.download_artifacts(run.info.run_id, "analyze/summary.json", str(tmp_path))
    assert '"verdict": "pass"' in Path(local).read_text()


def test_sweep_against_the_server(mlflow_server: str, tmp_path: Path) -> None:
    result = run_module(
        "pipeline",
        "-m",
        "model=mlp,three_inputs",
        "backend=xnnpack",
        f"tracking.uri={mlflow_server}",
        "tracking.experiment=server-sweep",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("server-sweep")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2 and all(c.info.status == "FINISHED" for c in children)
    paths = {a.path for a in client.list_artifacts(parent.info.run_id, "comparison")}
    assert "comparison/comparison_runs.csv" in paths


def test_unreachable_server_keeps_everything_then_syncs(
    mlflow_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    with caplog.at_level("WARNING"):
        run_dir = _run(tmp_path, f"tracking.uri={dead}", "tracking.experiment=offline")
    store = run_dir / "offline_mlflow" / "mlflow.db"
    assert store.is_file() and (run_dir / "report.html").is_file()
    command = f"python -m pipeline.tools.sync --from sqlite:///{store.resolve()} --to {dead}"
    assert command in caplog.text
    local = MlflowClient(f"sqlite:///{store}")
    (offline_run,) = local.search_runs([local.get_experiment_by_name("offline").experiment_id])
    assert offline_run.info.status == "FINISHED"

    assert sync_main(["--from", f"sqlite:///{store}", "--to", mlflow_server]) == 0
    client = MlflowClient(mlflow_server)
    (synced,) = client.search_runs([client.get_experiment_by_name("offline").experiment_id])
    assert synced.info.status == "FINISHED"
    assert synced.data.params == offline_run.data.params
    assert synced.data.metrics == offline_run.data.metrics
    assert {a.path for a in client.list_artifacts(synced.info.run_id, "analyze")} >= {
        "analyze/report.html",
        "analyze/events.csv",
    }
    assert sync_main(["--from", f"sqlite:///{store}", "--to", mlflow_server]) == 0  # idempotent
    assert len(client.search_runs([client.get_experiment_by_name("offline").experiment_id])) == 1


def test_an_unchanged_rerun_points_at_the_servers_run(mlflow_server: str, tmp_path: Path) -> None:
    overrides = (f"tracking.uri={mlflow_server}", "tracking.experiment=server-unchanged")
    results = []
    for run in ("first", "again"):
        cfg = compose_config(tmp_path, ["model=mlp", "backend=xnnpack", *overrides])
        with open_dict(cfg):
            cfg.run_dir = str(tmp_path / run)
        results.append(run_pipeline(cfg, print_summary=False))
    first, again = results
    assert again.tracking_run_id == first.tracking_run_id is not None
    assert again.tracking.startswith("unchanged: ")
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("server-unchanged")
    assert len(client.search_runs([experiment.experiment_id])) == 1
