"""The real CLI in a subprocess: `python -m pipeline ...` as a person types it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.cli_runner import run_module

TINY_VIT = [
    "model=vit",
    "model.kwargs.depth=1",
    "model.kwargs.dim=32",
    "model.kwargs.heads=2",
    "model.kwargs.image_size=32",
    "model.inputs=[{shape:[1,3,32,32]}]",
]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_module("pipeline", *args, cwd=cwd, timeout=600)


@pytest.mark.e2e
def test_help_and_cfg_job_work_from_any_directory(tmp_path: Path) -> None:
    helped = _cli("--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "model: " in helped.stdout and "backend: " in helped.stdout
    job = _cli("--cfg", "job", "model=llm", cwd=tmp_path)
    assert job.returncode == 0 and "name: llm" in job.stdout
    typo = _cli("--cfg", "job", "runtime.iteratons=3", cwd=tmp_path)
    assert typo.returncode != 0 and "iteratons" in typo.stderr


@pytest.mark.e2e
def test_export_stage_run_is_tracked_then_reused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [*TINY_VIT, "backend=xnnpack", "stages=[export]", f"hydra.run.dir={run_dir}"]
    first = _cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (run_dir / "exported.pt2").is_file()
    # The ETRecord is the lower stage's output; export writes no part of it.
    assert not (run_dir / "etrecord.zip").exists()

    # The default store is a sqlite file under outputs/ of the working directory.
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("delegate-debugger")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["model.name"] == "vit" and run.data.params["model.kwargs.depth"] == "1"
    assert run.data.tags["model"] == "vit" and run.data.tags["backend"] == "xnnpack"
    assert run.data.tags["stage.export"] == "done" and len(run.data.tags["git_commit"]) >= 7
    exported = {a.path for a in client.list_artifacts(run.info.run_id, "export")}
    assert {
        "export/exported.pt2",
        "export/inputs.pt",
        "export/inputs.json",  # which samples the export took, and for what
        "export/reference_outputs.pt",
    } == exported
    assert "export.debug_handles" in run.data.metrics

    second = _cli(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "[export] reused: fingerprint" in second.stdout + second.stderr


@pytest.mark.e2e
def test_failed_stage_names_itself_and_prints_the_resume_command(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = _cli(
        *TINY_VIT,
        "model.kwargs.heads=5",
        "stages=[export]",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "stage 'export' failed" in result.stderr
    assert f"hydra.run.dir={run_dir}" in result.stderr and "python -m pipeline" in result.stderr
    assert "Traceback" not in result.stderr
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("delegate-debugger")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FAILED" and "heads=5" in run.data.tags["error"]


@pytest.mark.e2e
def test_full_pipeline_from_the_cli_gives_a_verdict_and_logs_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = _cli(*TINY_VIT, "backend=xnnpack", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "== analysis: verdict PASS" in out and "slowest ops" in out and "largest gaps" in out
    assert f"report: {run_dir / 'report.html'}" in out
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("delegate-debugger")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_id in out
    metrics = run.data.metrics
    assert metrics["analyze.verdict_pass"] == 1.0 and metrics["analyze.compared_outputs"] > 0
    for key in (
        "latency_p50_ms",
        "latency_p90_ms",
        "delegated_time_share",
        "partitions",
        "delegated_op_ratio",
        "max_gap",
    ):
        assert f"analyze.{key}" in metrics, key
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "analyze")}
    assert {
        "analyze/report.html",
        "analyze/events.csv",
        "analyze/numeric_gap.csv",
        "analyze/trace.json",
        "analyze/summary.json",
        "analyze/top_ops_p50.svg",
    } <= logged
    # A gap plot only when some output is not exact (a clean fp32 run says so in words instead).
    exact = "largest gaps: none" in out
    assert ("analyze/numeric_gap.svg" in logged) != exact
    tables = {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    assert {"tables/events.json", "tables/numeric_gap.json"} <= tables


USER_MODEL = """
import torch
from torch import nn


class Two(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(32, width)

    def forward(self, image, vec):
        pooled = self.conv(image).mean(dim=(2, 3))
        h = self.fc(vec)
        return pooled[:, : h.shape[1]] + h, h.argmax(-1).float()


def make(width=8):
    return Two(width)
"""
USER_INPUTS = "model.inputs=[{shape:[1,8,16,16]},{shape:[1,32]}]"


@pytest.mark.e2e
def test_a_users_model_runs_from_outside_the_checkout(tmp_path: Path) -> None:
    """The README's two forms: a file next to you, and a package on your path (issue 12.1)."""
    (tmp_path / "my_model.py").write_text(USER_MODEL)
    run_dir = tmp_path / "run"
    file_form = _cli(
        "model=custom",
        "model._target_=./my_model.py:make",
        USER_INPUTS,
        "tracking=none",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert file_form.returncode == 0, file_form.stderr
    assert "== analysis: verdict PASS" in file_form.stdout
    assert (run_dir / "report.html").is_file()

    (tmp_path / "userpkg").mkdir()
    (tmp_path / "userpkg" / "__init__.py").write_text("")
    (tmp_path / "userpkg" / "models.py").write_text(USER_MODEL)
    dotted = _cli(
        "model=custom",
        "model._target_=userpkg.models.make",
        "model.kwargs.width=6",
        USER_INPUTS,
        "tracking=none",
        "stages=[export]",
        f"hydra.run.dir={tmp_path / 'dotted'}",
        cwd=tmp_path,
    )
    assert dotted.returncode == 0, dotted.stderr
    leaked = _cli("model=vit", "model._target_=./my_model.py:make", "tracking=none", cwd=tmp_path)
    assert leaked.returncode != 0 and "model=custom model._target_=" in leaked.stderr
