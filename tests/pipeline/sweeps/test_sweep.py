"""Sweeps from the real CLI: parent and child runs, shared export, comparison, a failing job."""

from __future__ import annotations

import csv
import socket
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.cli_runner import run_module

# Each test runs a whole multi-job sweep in subprocesses: over pytest's 120 s default on a loaded
# 2-core machine (130 s measured at load average 11).
pytestmark = pytest.mark.timeout(300)


def sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_module("pipeline", "-m", *args, f"hydra.sweep.dir={cwd / 'sweep'}", cwd=cwd)


def _runs(uri: str) -> tuple[MlflowClient, list, list]:  # type: ignore[type-arg]
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("delegate-debugger")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep") == "parent"]
    children = [r for r in runs if r.data.tags.get("sweep") != "parent"]
    return client, parents, children


@pytest.mark.e2e
def test_sweep_logs_children_under_one_parent_and_exports_each_model_once(tmp_path: Path) -> None:
    result = sweep(tmp_path, "model=mlp,three_inputs", "backend=xnnpack,qnn")
    assert result.returncode == 0, result.stderr[-3000:]
    client, (parent,), children = _runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    assert len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert all(c.info.status == "FINISHED" for c in children)
    assert parent.info.status == "FINISHED" and parent.data.metrics["sweep.jobs"] == 4
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "comparison")}
    assert {
        "comparison/comparison_runs.csv",
        "comparison/latency_vs_gap.svg",
        "comparison/comparison_ops_mlp.csv",
        "comparison/comparison_ops_three_inputs.csv",
    } <= logged
    with (tmp_path / "sweep" / "comparison" / "comparison_ops_mlp.csv").open() as fh:
        ops = list(csv.DictReader(fh))
    assert ops and {
        "p50_ms[xnnpack-fp32 @ emulated]",
        "p50_ms[qnn-fp16 @ emulated]",
        "slowest",
    } <= set(ops[0])
    # Shared export: per model, one job ran the export stage and the other reused it.
    logs = {
        d.name: "".join(p.read_text() for p in d.glob("*.log"))
        for d in (tmp_path / "sweep").iterdir()
        if d.name != "comparison" and d.is_dir()
    }
    for model in ("mlp", "three_inputs"):
        mine = [text for name, text in logs.items() if f"-{model}-" in name]
        assert len(mine) == 2
        assert sum("[export] done" in t for t in mine) == 1, model
        assert sum("[export] reused" in t for t in mine) == 1, model
    assert "== sweep: 4 jobs, 0 failed, 0 failed verdict(s) ==" in result.stdout

    # pipeline.tools.compare: the same comparison for runs picked by tags, printed and exported.
    compared = run_module(
        "pipeline.tools.compare",
        "--tag",
        "backend=qnn",
        "--uri",
        f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}",
        "--out",
        str(tmp_path / "cmp"),
        cwd=tmp_path,
    )
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert "2 runs; written:" in compared.stdout
    rows = list(csv.DictReader((tmp_path / "cmp" / "comparison_runs.csv").open()))
    assert sorted(r["model"] for r in rows) == ["mlp", "three_inputs"]
    assert {r["backend"] for r in rows} == {"qnn"}
    missing = run_module(
        "pipeline.tools.compare",
        "--tag",
        "backend=tpu",
        "--uri",
        f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}",
        cwd=tmp_path,
    )
    assert missing.returncode == 1 and "no finished runs match" in missing.stderr


@pytest.mark.e2e
def test_a_failing_job_does_not_stop_the_others(tmp_path: Path) -> None:
    # three_inputs takes three inputs, not one: its export stage fails; the mlp job must finish.
    result = sweep(
        tmp_path,
        "model=mlp,three_inputs",
        "backend=xnnpack",
        "backend.fault.node=linear_2",
        "model.inputs=[{shape:[4,32]}]",
    )
    assert result.returncode != 0
    assert "1 sweep job(s) failed: three_inputs/xnnpack" in result.stderr + result.stdout
    _, (parent,), children = _runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    status = {c.data.tags["model"]: c.info.status for c in children}
    assert status == {"mlp": "FINISHED", "three_inputs": "FAILED"}
    assert parent.info.status == "FAILED" and parent.data.metrics["sweep.failed_jobs"] == 1
    rows = list(csv.DictReader((tmp_path / "sweep" / "comparison" / "comparison_runs.csv").open()))
    assert {(r["model"], r["status"]) for r in rows} == {
        ("mlp", "FINISHED"),
        ("three_inputs", "FAILED"),
    }
    assert next(r for r in rows if r["model"] == "mlp")["first_divergence"] == "linear_2"


@pytest.mark.e2e
def test_submitit_local_launcher_records_the_sweep(tmp_path: Path) -> None:
    result = sweep(tmp_path, "model=mlp", "backend=xnnpack,qnn", "hydra/launcher=submitit_local")
    assert result.returncode == 0, result.stderr[-3000:]
    _, (parent,), children = _runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    assert len(children) == 2 and all(c.info.status == "FINISHED" for c in children)
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.e2e
@pytest.mark.parametrize("tracking", ["none", "unreachable_server"])
def test_a_sweep_with_a_failed_job_exits_non_zero_without_a_tracking_store(
    tmp_path: Path, tracking: str
) -> None:
    """(With the default sqlite store: test_a_failing_job_does_not_stop_the_others.) The basic
    launcher keeps it fast; failures are counted from job dirs whatever the launcher. Behind an
    unreachable server each job creates its own fallback store (seconds), so one failing job."""
    tracking_args, nodes = {
        "none": (["tracking=none"], "linear_2,absent"),
        "unreachable_server": ([f"tracking.uri=http://127.0.0.1:{_closed_port()}"], "absent"),
    }[tracking]
    # mlp has linear_2 but no node named absent: that job's lower stage fails.
    result = sweep(
        tmp_path,
        "model=mlp",
        "stages=[export,lower]",
        f"backend.fault.node={nodes}",
        "hydra/launcher=basic",
        *tracking_args,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "error: 1 sweep job(s) failed: mlp/xnnpack" in output
    finished = len(list((tmp_path / "sweep").glob("*/lowered_program.zip")))
    assert finished == nodes.count(",")  # the other job, if any, finished


@pytest.mark.e2e
def test_an_untracked_sweep_still_writes_its_comparison_per_op(tmp_path: Path) -> None:
    result = sweep(
        tmp_path, "model=mlp", "backend=xnnpack,qnn", "hydra/launcher=basic", "tracking=none"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert not (tmp_path / "outputs" / "mlflow.db").exists()
    comparison = tmp_path / "sweep" / "comparison"
    runs = list(csv.DictReader((comparison / "comparison_runs.csv").open()))
    assert {(r["backend"], r["status"], r["verdict"]) for r in runs} == {
        ("xnnpack", "FINISHED", "pass"),
        ("qnn", "FINISHED", "pass"),
    }
    ops = list(csv.DictReader((comparison / "comparison_ops_mlp.csv").open()))
    both = [
        o for o in ops if o["p50_ms[xnnpack-fp32 @ emulated]"] and o["p50_ms[qnn-fp16 @ emulated]"]
    ]
    # Every op of the model is on a row both backends timed, whatever each one fused.
    assert {n for o in both for n in o["op"].split("+")} >= {"linear", "linear_1", "linear_2"}
    assert "comparison: " in result.stdout
