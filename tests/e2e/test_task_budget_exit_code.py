"""A run whose verdict passes and whose SNR budget holds but whose task drop exceeds
analyze.accuracy_budget.max_drop exits 5, saying why, as a missed SNR budget does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.exits.verdict_code import ACCURACY_MISSED_EXIT_CODE
from tests.helpers.cli_runner import run_module
from tests.helpers.task_labels import float_model_labels

MODEL = ["model=outlier_mlp", "inputs.count=4"]


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_a_missed_task_budget_alone_exits_5(tmp_path: Path) -> None:
    labels = float_model_labels(tmp_path, *MODEL)
    args = [
        *MODEL,
        "backend=xnnpack",
        "backend.precision=int8",
        "tracking=none",
        "analyze.accuracy_budget.snr_db=0",
        "analyze.task=classification",
        f"analyze.labels={labels}",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    missed = run_module(
        "pipeline",
        *args,
        "analyze.accuracy_budget.max_drop=5",
        "hydra.run.dir=missed",
        cwd=tmp_path,
    )
    assert missed.returncode == ACCURACY_MISSED_EXIT_CODE, missed.stderr[-2000:]
    assert (
        "accuracy: budget MISSED (SNR >= 0 dB, top-1 drop <= 5): task top-1 drop" in missed.stdout
    )
    summary = json.loads((tmp_path / "missed" / "summary.json").read_text())
    task = summary["accuracy"]["task"]
    assert summary["verdict"] == "pass" and task["met"] is False and task["drop"] > 5
    assert all(o["met"] for o in summary["accuracy"]["outputs"])  # only the task misses
    unjudged = run_module("pipeline", *args, "hydra.run.dir=unjudged", cwd=tmp_path)
    assert unjudged.returncode == 0, unjudged.stderr[-2000:]  # no max_drop: reported only
    assert "not judged" in unjudged.stdout
