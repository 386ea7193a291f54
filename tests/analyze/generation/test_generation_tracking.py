"""A generation's plot, tables and headline numbers are logged to MLflow (issue 37.2)."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.analyze.generation.conftest import SMALL_LLM
from tests.helpers.configs import compose_config


def test_generation_outputs_reach_mlflow(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, [*SMALL_LLM, "runtime.generate.new_tokens=2"])
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    outcome = run_pipeline(cfg, print_summary=False)
    client = MlflowClient(str(cfg.tracking.uri))
    run_id = str(outcome.tracking_run_id)
    artifacts = {a.path for a in client.list_artifacts(run_id, "analyze")}
    for name in ("generation_gap.svg", "generation_gaps.csv", "generation_kv_cache.csv"):
        assert f"analyze/{name}" in artifacts, artifacts
    metrics = client.get_run(run_id).data.metrics
    assert metrics["analyze.generation_top1_agreement"] == 1.0
    assert metrics["analyze.generation_decode_tokens_per_s"] > 0
    assert metrics["analyze.generation_captured_steps"] == 3.0
