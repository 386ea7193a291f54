"""The torch thread count each stage ran with is recorded, and timings under another count are
never reused."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.helpers.configs import compose_config


def test_run_stage_is_not_reused_under_another_thread_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = compose_config(tmp_path, ["model=mlp", "stages=[export,lower,run]"])
    first = run_pipeline(cfg, print_summary=False)
    first_run = next(o for o in first.stages if o.name == "run")
    assert first_run.torch_threads == 1

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run2")
    second = run_pipeline(cfg, print_summary=False)
    statuses = {o.name: o.status.value for o in second.stages}
    assert statuses == {"export": "reused", "lower": "reused", "run": "done"}
    run = next(o for o in second.stages if o.name == "run")
    assert run.torch_threads == 2
    assert run.digest != first_run.digest

    params = MlflowClient(str(cfg.tracking.uri)).get_run(str(second.tracking_run_id)).data.params
    assert params["torch_threads.run"] == "2"
    assert params["torch_threads.export"] == "1"  # a reused stage: the count it ran with
