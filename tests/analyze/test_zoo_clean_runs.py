"""No false alarms on clean runs (issue 12.7): every zoo model on every backend is exact at fp32,
and passes with the default thresholds at fp16 and int8 (tiny configs)."""

from __future__ import annotations

import pytest

from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.configs import ZOO_MODELS

RUNS = [
    ("xnnpack", "fp32"),
    ("qnn", "fp32"),
    ("portable", "fp32"),
    ("qnn", "fp16"),
    ("xnnpack", "fp16"),
    ("xnnpack", "int8"),
    ("qnn", "int8"),
]


@pytest.mark.parametrize(("backend", "precision"), RUNS)
@pytest.mark.parametrize("model", ZOO_MODELS)
def test_clean_zoo_runs_pass(run_tiny: RunTiny, model: str, backend: str, precision: str) -> None:
    run_dir = run_tiny(
        f"clean-{model}-{backend}-{precision}",
        model,
        f"backend={backend}",
        f"backend.precision={precision}",
    )
    summary = read_summary(run_dir)
    assert summary["verdict"] == "pass", summary["first_divergence"]
    assert summary["compared_outputs"] > 0
    if precision == "fp32":
        assert summary["max_gap"] == "inf", f"{model} on {backend} at fp32 is not exact"
