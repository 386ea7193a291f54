"""`python -m pipeline.tools.clean --keep N` on real runs: old run dirs, their cache entries and MLflow
runs go; the kept run stays whole and is still reused."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.cli_runner import run_module

TINY = ("model=mlp", "runtime.iterations=2")


def _run(cwd: Path, backend: str) -> str:
    result = run_module("pipeline", *TINY, f"backend={backend}", cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def _runs(outputs: Path) -> dict[str, tuple[str, str]]:
    """run_dir tag -> (lifecycle stage, run id)."""
    client = MlflowClient(f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("delegate-debugger")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], run_view_type=3)  # ALL
    return {r.data.tags["run_dir"]: (r.info.lifecycle_stage, r.info.run_id) for r in runs}


@pytest.mark.e2e
def test_keep_one_removes_the_older_run_its_cache_entries_and_its_mlflow_run(
    tmp_path: Path,
) -> None:
    _run(tmp_path, "xnnpack")
    _run(tmp_path, "qnn")
    outputs = tmp_path / "outputs"
    old, new = sorted((outputs / "runs").glob("*/*"), key=lambda p: p.stat().st_mtime)
    before = _runs(outputs)
    assert (before[str(old)][0], before[str(new)][0]) == ("active", "active")
    entries_before = sorted((outputs / "cache").glob("*/*/record.json"))
    assert len(entries_before) == 7  # one export, two each of lower, run, analyze

    dry = run_module("pipeline.tools.clean", "--keep", "1", "--dry-run", cwd=tmp_path, timeout=120)
    assert dry.returncode == 0 and f"would remove {old}" in dry.stdout and old.is_dir()
    assert f"would delete MLflow run {before[str(old)][1]} (mlp-xnnpack-fp32)" in dry.stdout
    assert "and 1 MLflow runs" in dry.stdout

    cleaned = run_module("pipeline.tools.clean", "--keep", "1", cwd=tmp_path, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "removed 1 run dirs, 3 cache entries, 1 MLflow runs" in cleaned.stdout
    assert not old.exists() and (new / "report.html").is_file()
    assert len(sorted((outputs / "cache").glob("*/*/record.json"))) == 4
    runs = _runs(outputs)
    assert runs[str(old)][0] == "deleted" and runs[str(new)][0] == "active"
    artifacts = outputs / "mlartifacts" / "delegate-debugger"
    assert not (artifacts / runs[str(old)][1]).exists()
    assert (artifacts / runs[str(new)][1] / "artifacts" / "analyze" / "summary.json").is_file()

    # The kept run is still whole in the cache; the removed backend's stages run again.
    again = _run(tmp_path, "qnn")
    assert all(f"[{stage}] reused" in again for stage in ("export", "lower", "run", "analyze"))
    redo = _run(tmp_path, "xnnpack")
    assert "[export] reused" in redo and "[lower] done" in redo


def test_bad_arguments_say_what_is_wrong(tmp_path: Path) -> None:
    missing = run_module("pipeline.tools.clean", "--keep", "2", "--outputs", "nope", cwd=tmp_path)
    assert missing.returncode == 2 and "--outputs" in missing.stderr and "nope" in missing.stderr
    negative = run_module("pipeline.tools.clean", "--keep", "-1", cwd=tmp_path)
    assert negative.returncode == 2 and "--keep must be >= 0" in negative.stderr
