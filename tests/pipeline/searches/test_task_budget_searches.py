"""Searches against the task budget (issue 45.6), through the real CLI: with the SNR budget out of
the way (0 dB), the int8 outlier MLP misses only its task budget (top-1 against labels the float
model gives), so the precision search keeps the outlier's two linears float and the delegation
search keeps them off the delegate (its verdict passes: without the task budget, nothing to do)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.search_runs import run_search
from tests.helpers.task_labels import float_model_labels

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
MODEL = ["model=outlier_mlp", "inputs.count=4", "tracking=none"]
TASK = [
    "backend=xnnpack",
    "backend.precision=int8",
    "analyze.accuracy_budget.snr_db=0",
    "analyze.task=classification",
    "analyze.accuracy_budget.max_drop=5",
    "search.sensitivity=false",
]


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The float model's own top-1 class per row of the samples every trial runs."""
    return float_model_labels(tmp_path_factory.mktemp("labels"), *MODEL)


def test_precision_search_keeps_ops_float_until_the_task_drop_is_within_budget(
    tmp_path: Path, labels: Path
) -> None:
    result, found = run_search(
        tmp_path, "p", "search=precision", *MODEL, *TASK, f"analyze.labels={labels}"
    )
    baseline = found["trial_log"][0]
    assert baseline["accuracy_met"] is False and baseline["task_met"] is False
    assert baseline["task_drop"] > 5 and baseline["min_snr_db"] > 0  # only the task misses
    assert found["result"] == {"backend.keep_float": ["linear_1", "linear_2"]}
    assert found["verified"]["task_met"] is True and found["verified"]["task_drop"] <= 5
    assert "task drop" in result.stdout


def test_delegation_search_runs_for_a_missed_task_budget_alone(
    tmp_path: Path, labels: Path
) -> None:
    _, found = run_search(
        tmp_path, "d", "search=delegation", *MODEL, *TASK, f"analyze.labels={labels}"
    )
    baseline = found["trial_log"][0]
    assert baseline["verdict"] != "fail" and baseline["task_met"] is False
    kept_off = found["result"]["backend.keep_off"]
    assert "linear_1" in kept_off or "linear_2" in kept_off
    assert found["verified"]["task_met"] is True and found["verified"]["verdict"] != "fail"
