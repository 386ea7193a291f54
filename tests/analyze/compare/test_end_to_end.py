"""End-to-end accuracy against the budget (issue 36.1): per output SNR, the gap metric in its
units, top-1 agreement, `met`, and why an output misses."""

from __future__ import annotations

import math

import torch

from stages.analyze.compare.comparators import MSE, SNR
from stages.analyze.compare.end_to_end import AccuracyBudget, accuracy_metrics, measure_accuracy


def _logits() -> torch.Tensor:
    return torch.tensor([[4.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [2.0, 6.0, 1.0]])


def test_an_exact_output_meets_and_a_noisy_one_misses_with_its_reason() -> None:
    reference = [(_logits(),)]
    exact = measure_accuracy([[_logits()]], reference, SNR(), AccuracyBudget(20.0))
    assert exact["met"] is True
    assert exact["outputs"][0]["snr_db"] == "inf" and exact["outputs"][0]["top1_agreement"] == 1.0
    noisy = _logits() + torch.tensor([[0.0, 0.0, 5.0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    missed = measure_accuracy([[noisy]], reference, MSE(), AccuracyBudget(20.0, 1.0))
    out = missed["outputs"][0]
    expected_snr = 10 * math.log10(float((_logits() ** 2).sum()) / 25.0)
    assert missed["met"] is False and out["met"] is False
    assert abs(out["snr_db"] - expected_snr) < 1e-9
    assert abs(out["metric_value"] - 25.0 / 12) < 1e-9  # mse in its own units
    assert out["top1_agreement"] == 0.75  # the first row's argmax moved
    assert "SNR" in missed["reason"] and "top-1 agreement 0.75 < 1" in missed["reason"]
    assert accuracy_metrics(missed)["accuracy_met"] == 0.0


def test_top1_is_judged_only_when_budgeted_and_integer_outputs_count_equal_elements() -> None:
    reference = [(_logits(), torch.tensor([0, 1, 2, 1]))]
    runtime = [[_logits() * 1.0001, torch.tensor([0, 1, 2, 2])]]
    unjudged = measure_accuracy(runtime, reference, SNR(), AccuracyBudget(20.0))
    assert unjudged["met"] is True  # integer output reported, not judged without a top-1 budget
    assert unjudged["outputs"][1]["top1_agreement"] == 0.75
    assert unjudged["outputs"][1]["met"] is None
    judged = measure_accuracy(runtime, reference, SNR(), AccuracyBudget(20.0, 0.9))
    assert judged["met"] is False and judged["outputs"][1]["met"] is False


def test_nothing_logged_is_not_evaluated_not_a_miss() -> None:
    record = measure_accuracy([], [(_logits(),)], SNR(), AccuracyBudget(20.0))
    assert record["met"] is None and "program_outputs" in record["reason"]
    shape = measure_accuracy([[torch.zeros(2, 3)]], [(_logits(),)], SNR(), AccuracyBudget(20.0))
    assert shape["met"] is False and "differs" in shape["reason"]
