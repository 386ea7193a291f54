"""MLflow's artifact progress bars ("Downloading artifacts", drawn by tqdm on stderr) stay off
the terminal: a sweep's comparison and every search downloaded a run's analysis files and printed
one per file (issue 44). A value the user set is kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.tracking.client import download_run_dirs, tracking_client
from pipeline.tracking.dependency_logs import PROGRESS_BAR_ENV


def _run_with_artifacts(uri: str, tmp_path: Path) -> str:
    client = tracking_client(uri)
    experiment = client.create_experiment("bars", artifact_location=str(tmp_path / "artifacts"))
    run_id = str(client.create_run(experiment).info.run_id)
    analysis = tmp_path / "analyze"
    analysis.mkdir()
    for name in ("summary.json", "events.csv", "numeric_gap.csv"):
        (analysis / name).write_text("{}" if name.endswith(".json") else "a,b\n1,2\n")
    client.log_artifacts(run_id, str(analysis), "analyze")
    client.set_terminated(run_id)
    return run_id


def test_downloading_a_runs_files_draws_no_progress_bar(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROGRESS_BAR_ENV, "true")
    monkeypatch.delenv(PROGRESS_BAR_ENV)  # unset now, and unset again after the test
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = _run_with_artifacts(uri, tmp_path)
    capfd.readouterr()
    target = download_run_dirs(uri, run_id, ["analyze"], tmp_path / "downloaded")
    assert (target / "analyze" / "summary.json").is_file()
    out, err = capfd.readouterr()
    assert "Downloading artifacts" not in out + err, err


def test_a_progress_bar_the_user_asked_for_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROGRESS_BAR_ENV, "true")
    tracking_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert os.environ[PROGRESS_BAR_ENV] == "true"
