"""Op names in the options are checked before any stage (issue 36.2): an unknown name leaves no
run directory and no MLflow run; a known one exports once, the run's export stage reusing it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

import stages.export.stage as export_stage
from pipeline.outcomes import StageStatus
from pipeline.runner import run_pipeline
from tests.helpers.cli_runner import run_module


def _mlflow_runs(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as connection:
        tables = {r[0] for r in connection.execute("select name from sqlite_master")}
        return (
            connection.execute("select count(*) from runs").fetchone()[0] if "runs" in tables else 0
        )


def test_an_unknown_op_name_leaves_no_run_dir_and_no_mlflow_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "the_run"
    proc = run_module(
        "pipeline",
        "model=mlp",
        "backend=xnnpack",
        "backend.keep_off=[linear_11]",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "error: backend.keep_off: 'linear_11' is not an op" in out, out
    assert "did you mean: linear_1" in out and "Traceback" not in out, out
    assert not run_dir.exists(), out
    assert _mlflow_runs(tmp_path / "outputs" / "mlflow.db") == 0


@pytest.mark.parametrize("cache", ["true", "false"])
def test_a_known_name_exports_once_and_reports_the_export_done(
    make_cfg: Callable[..., DictConfig], monkeypatch: pytest.MonkeyPatch, cache: str
) -> None:
    calls: list[Path] = []
    original = export_stage.run_export

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[3])
        return original(*args, **kwargs)

    monkeypatch.setattr(export_stage, "run_export", counted)
    cfg = make_cfg(
        "model=mlp",
        "backend=xnnpack",
        "backend.fault.node=linear_1",
        "tracking=none",
        f"cache={cache}",
    )
    result = run_pipeline(cfg, print_summary=False)
    assert len(calls) == 1 and calls[0] != result.run_dir
    export = result.stages[0]
    assert export.status == StageStatus.done and "name ops" in export.reason
    assert (result.run_dir / "exported.pt2").is_file() and (
        result.run_dir / "summary.json"
    ).is_file()
    assert not list(Path(cfg.cache_dir).rglob("preflight-*"))  # scratch dirs removed
