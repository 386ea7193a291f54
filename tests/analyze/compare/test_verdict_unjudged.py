"""An output whose expected error could not be computed is not judged against the floor alone
(issue 44: every BatchNorm network FAILed at int8 on ExecuTorch's XNNPACK when the emulated
re-run stopped at a `getitem`): the verdict leaves it not evaluated and says why, while a
non-finite error (a NaN fault) is still a FAIL."""

from __future__ import annotations

import torch

from stages.analyze.compare.comparators import SNR
from stages.analyze.compare.expected_error import error_budget
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.compare.verdict import FAIL, NOT_EVALUATED, PASS, decide, row_diverged

MARGIN = 6.0
WHY = "OpEncodingError: <built-in function getitem> is not an ATen op overload"


def _row(group: int, runtime: torch.Tensor, reference: torch.Tensor, fallback: str) -> GapRow:
    """A float row as the gap rows build it: its budget against the floor alone when its
    expected re-run failed (`expected` None)."""
    snr = SNR().compare(runtime, reference)
    row = GapRow(group, group, 0, (group + 1,), [], "", True, "ok", samples=1)
    row.accumulated, row.local = {"snr": snr}, {"snr": snr}
    row.budget = error_budget([runtime], [reference], None, "int8", 0.25)
    row.expected_fallback = fallback
    return row


def _int8_noise(reference: torch.Tensor) -> torch.Tensor:
    """What int8 costs over a few layers: far above the floor of a quarter step."""
    return reference + 0.03 * reference.abs().max() * torch.randn_like(reference)


def test_outputs_without_an_expected_error_are_not_evaluated_not_failed() -> None:
    torch.manual_seed(0)
    reference = torch.randn(1, 8, 16, 16)
    unjudged = _row(0, _int8_noise(reference), reference, WHY)
    assert unjudged.budget["excess_db"] > MARGIN  # against the floor alone it would FAIL
    assert not row_diverged(unjudged, "snr", 26.0, True, MARGIN)
    verdict = decide([unjudged], SNR(), 26.0, True, margin=MARGIN)
    assert verdict.status == NOT_EVALUATED and verdict.first_divergence is None
    assert "1 output(s) not evaluated" in verdict.reason and WHY in verdict.reason


def test_judged_outputs_still_decide_and_the_reason_names_the_rest() -> None:
    torch.manual_seed(1)
    reference = torch.randn(1, 8, 16, 16)
    judged = _row(1, reference + 1e-4 * torch.randn_like(reference), reference, "")
    verdict = decide(
        [_row(0, _int8_noise(reference), reference, WHY), judged], SNR(), 26.0, True, margin=MARGIN
    )
    assert verdict.status == PASS
    assert "2 outputs compared" in verdict.reason and "1 output(s) not evaluated" in verdict.reason
    faulty = _row(1, 1.5 * reference, reference, "")
    verdict = decide(
        [_row(0, _int8_noise(reference), reference, WHY), faulty], SNR(), 26.0, True, margin=MARGIN
    )
    assert verdict.status == FAIL and verdict.first_divergence is faulty


def test_a_nan_is_judged_even_without_an_expected_error() -> None:
    reference = torch.randn(1, 8, 4, 4)
    nan = reference.clone()
    nan[0, 0, 0, 0] = float("nan")
    row = _row(0, nan, reference, WHY)
    verdict = decide([row], SNR(), 26.0, True, margin=MARGIN)
    assert verdict.status == FAIL and verdict.first_divergence is row


def test_the_threshold_rule_is_unchanged() -> None:
    """`analyze.verdict_rule=threshold` (no margin) judges the local gap as before."""
    torch.manual_seed(2)
    reference = torch.randn(1, 8, 16, 16)
    row = _row(0, 1.5 * reference, reference, WHY)
    assert row_diverged(row, "snr", 26.0, True, None)
