"""An unchanged re-run logs no duplicate tracking run; any change, or a gone run, logs a new one."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, open_dict

from pipeline.outcomes import PipelineResult, StageStatus
from pipeline.runner import run_pipeline
from pipeline.tracking.unchanged_runs import RECORD_DIR, sqlite_run_finished
from tests.helpers.configs import compose_config


def _config(tmp_path: Path, run: str, *overrides: str) -> DictConfig:
    cfg = compose_config(tmp_path, ["model=mlp", "backend=xnnpack", *overrides])
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / run)
    return cfg


def _invoke(tmp_path: Path, run: str, *overrides: str) -> PipelineResult:
    return run_pipeline(_config(tmp_path, run, *overrides), print_summary=False)


def _run_ids(tmp_path: Path) -> list[str]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return [r.info.run_id for r in client.search_runs(experiments)]


def test_an_unchanged_rerun_points_at_the_earlier_run(tmp_path: Path) -> None:
    first = _invoke(tmp_path, "first")
    assert gc.get_freeze_count() == 0  # the stages froze the heap; the invocation unfroze it
    again = _invoke(tmp_path, "again")

    assert all(o.status == StageStatus.reused for o in again.stages)
    assert again.tracking_run_id == first.tracking_run_id
    assert again.tracking.startswith(f"unchanged: MLflow run {first.tracking_run_id}")
    assert "mlflow ui --backend-store-uri sqlite:///" in again.tracking  # on every run
    assert _run_ids(tmp_path) == [first.tracking_run_id]
    assert (tmp_path / "again" / "summary.json").is_file()  # the results are in the new run dir


def test_log_unchanged_or_a_changed_option_logs_a_new_run(tmp_path: Path) -> None:
    first = _invoke(tmp_path, "first")
    forced = _invoke(tmp_path, "forced", "tracking.log_unchanged=true")
    changed = _invoke(tmp_path, "changed", "analyze.thresholds.fp32=50")

    assert forced.tracking_run_id not in (None, first.tracking_run_id)
    assert changed.tracking_run_id not in (None, first.tracking_run_id, forced.tracking_run_id)
    assert len(_run_ids(tmp_path)) == 3


def test_a_deleted_or_unfinished_earlier_run_is_not_pointed_at(tmp_path: Path) -> None:
    first = _invoke(tmp_path, "first")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert first.tracking_run_id is not None
    assert sqlite_run_finished(uri, first.tracking_run_id)
    MlflowClient(uri).delete_run(first.tracking_run_id)
    assert not sqlite_run_finished(uri, first.tracking_run_id)

    again = _invoke(tmp_path, "again")
    assert again.tracking_run_id not in (None, first.tracking_run_id)
    MlflowClient(uri).set_terminated(str(again.tracking_run_id), status="RUNNING")
    third = _invoke(tmp_path, "third")
    assert third.tracking_run_id not in (None, first.tracking_run_id, again.tracking_run_id)


def test_a_corrupt_or_foreign_record_is_ignored(tmp_path: Path) -> None:
    first = _invoke(tmp_path, "first")
    (record,) = (tmp_path / "cache" / RECORD_DIR).glob("*.json")
    for text in ("{not json", '{"uri": "sqlite:///elsewhere.db", "run_id": "ab"}', "[1]"):
        record.write_text(text)
        again = _invoke(tmp_path, f"again{len(_run_ids(tmp_path))}")
        assert again.tracking_run_id not in (None, first.tracking_run_id)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record.write_text(json.dumps({"uri": uri, "run_id": "../../x"}))
    assert _invoke(tmp_path, "last").tracking_run_id is not None
