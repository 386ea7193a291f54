"""digits_cnn at int8 on real held-out digits (issue 45.3): its loader's first samples calibrate,
the next (other digits, none it trained on) are run and judged; top-1 against their labels stays
within 2 points of the float model on the emulated xnnpack and qnn and on ExecuTorch's XNNPACK,
written to summary.json's accuracy.task and to MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.runner import run_pipeline
from tests.helpers.configs import compose_config
from tests.helpers.optional import require_executorch

DIGITS = [
    "model=digits_cnn",
    "model.inputs=[{shape:[72,1,8,8]}]",
    "inputs=loader",
    "inputs._target_=stages.export.zoo.digits.digits_samples",
    "inputs.kwargs.batch=72",
    "inputs.calibration=5",  # 360 calibration digits, then 360 evaluation digits
    "inputs.evaluation=5",
    "backend.precision=int8",
    "analyze.task=classification",
    "analyze.accuracy_budget.max_drop=2",
    "runtime.iterations=2",
    "runtime.min_iterations=1",
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache and MLflow store for the module: the trained model is exported once."""
    return tmp_path_factory.mktemp("digits")


def _task_after_run(shared: Path, backend: str) -> tuple[dict, dict, str | None]:
    cfg = compose_config(shared, [*DIGITS, f"backend={backend}"])
    result = run_pipeline(cfg, print_summary=False)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    return summary["accuracy"]["task"], summary["inputs"], result.tracking_run_id


@pytest.mark.parametrize("backend", ["xnnpack", "qnn", "executorch_xnnpack"])
def test_int8_top1_on_held_out_digits_stays_within_two_points(shared: Path, backend: str) -> None:
    if backend.startswith("executorch"):
        require_executorch()
    task, inputs, run_id = _task_after_run(shared, backend)
    assert inputs["calibrated_on_evaluation"] is False
    assert inputs["calibration"]["indices"] == [0, 5]  # the first 360 digits calibrate
    assert inputs["evaluation"]["indices"] == [5, 10]  # the next 360 are judged
    assert (task["name"], task["samples"], task["rows"]) == ("classification", 5, 360)
    assert task["reference"] >= 90.0 and task["runtime"] >= 90.0, task
    assert task["drop"] == pytest.approx(task["reference"] - task["runtime"])
    assert task["met"] is True and task["drop"] <= 2.0, task
    assert task["top5"]["runtime"] >= 99.0
    metrics = MlflowClient(f"sqlite:///{shared / 'mlflow.db'}").get_run(str(run_id)).data.metrics
    assert metrics["analyze.task_runtime"] == pytest.approx(task["runtime"])
    assert (
        metrics["analyze.task_drop"] == pytest.approx(task["drop"])
        and metrics["analyze.task_met"] == 1.0
    )
