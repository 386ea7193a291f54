"""A run can PASS its verdict and miss the accuracy budget (issue 36.1): the real CLI says so in
the summary and exits 5, apart from FAIL's 3; `analyze.accuracy_exit_code=false` exits 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.exits.verdict_code import ACCURACY_MISSED_EXIT_CODE, VERDICT_FAILED_EXIT_CODE
from tests.helpers.cli_runner import run_module

OUTLIER_INT8 = ["model=outlier_mlp", "backend=xnnpack", "backend.precision=int8", "tracking=none"]


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_a_passing_run_that_misses_its_budget_exits_5(tmp_path: Path) -> None:
    run_dir = tmp_path / "int8"
    missed = run_module(
        "pipeline",
        *OUTLIER_INT8,
        f"hydra.run.dir={run_dir}",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        timeout=600,
    )
    assert missed.returncode == ACCURACY_MISSED_EXIT_CODE == 5 != VERDICT_FAILED_EXIT_CODE
    assert "== analysis: verdict PASS" in missed.stdout
    assert "accuracy: budget MISSED (SNR >= 20 dB)" in missed.stdout
    assert "exit code 5" in missed.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"] == "pass" and summary["accuracy"]["met"] is False
    assert summary["accuracy"]["budget"] == {"snr_db": 20.0, "top1_agreement": None}
    assert "budget MISSED" in (run_dir / "report.html").read_text()
    kept = run_module(
        "pipeline",
        *OUTLIER_INT8,
        "analyze.accuracy_exit_code=false",
        f"hydra.run.dir={tmp_path / 'kept'}",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        timeout=600,
    )
    assert kept.returncode == 0, kept.stderr[-2000:]
