"""One tracking-URI resolution: `python -m pipeline` and every tool read the same store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tracking.store import resolve_tracking_uri
from tests.helpers.cli_runner import REPO


def test_given_uri_then_environment_then_the_store_under_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(tmp_path)
    assert resolve_tracking_uri() == f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    assert resolve_tracking_uri(store_dir=tmp_path / "o") == f"sqlite:///{tmp_path / 'o/mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/env.db")
    assert resolve_tracking_uri() == "sqlite:////elsewhere/env.db"
    assert resolve_tracking_uri("http://host:5000") == "http://host:5000"


def _module(module: str, *args: str, cwd: Path, store: str) -> subprocess.CompletedProcess[str]:
    """`python -m module` with $MLFLOW_TRACKING_URI set, as a user exporting it would run it."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": store}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.e2e
def test_the_tools_read_the_store_the_run_logged_to(tmp_path: Path) -> None:
    """After `MLFLOW_TRACKING_URI=... python -m pipeline`, compare, clean and liveness use that
    store, not outputs/mlflow.db of the current directory."""
    store = f"sqlite:///{tmp_path / 'team' / 'store.db'}"
    work = tmp_path / "work"
    work.mkdir()
    ran = _module("pipeline", "model=mlp", "runtime.iterations=2", cwd=work, store=store)
    assert ran.returncode == 0, ran.stderr[-3000:]

    compared = _module("pipeline.tools.compare", "--out", "cmp", cwd=work, store=store)
    assert compared.returncode == 0, compared.stderr[-3000:]
    assert "\n1 runs; written:" in compared.stdout

    alive = _module("pipeline.tracking.liveness", cwd=work, store=store)
    assert alive.returncode == 0 and f"in {store}" in alive.stdout, alive.stderr[-3000:]

    cleaned = _module("pipeline.tools.clean", "--keep", "0", cwd=work, store=store)
    assert cleaned.returncode == 0, cleaned.stderr[-3000:]
    assert "removed 1 run dirs, 4 cache entries, 1 MLflow runs" in cleaned.stdout
    assert not (work / "outputs" / "mlflow.db").exists()
