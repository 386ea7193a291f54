"""The verdict fails a row whose error repeats on every sample (gap/sample_stats.py) under the
expected rule even when its pooled excess is under the margin, names it first in graph order,
and says so in its reason; the threshold rule is left as it was."""

from __future__ import annotations

import torch

from stages.analyze.compare.comparators import SNR
from stages.analyze.compare.expected_error import error_budget
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.compare.verdict import FAIL, PASS, decide, row_diverged

MARGIN = 10.0


def _row(group: int, systematic: bool) -> GapRow:
    """An fp16 row 0.1% off its reference: far under the margin on the pooled rule."""
    reference = torch.randn(64, 64, generator=torch.Generator().manual_seed(group))
    runtime = reference * 1.001
    emulated = reference.half().float()
    snr = SNR().compare(runtime, reference)
    row = GapRow(group, group, 0, (group + 1,), [], "", True, "ok", samples=16)
    row.accumulated, row.local = {"snr": snr}, {"snr": snr}
    row.budget = error_budget([runtime], [reference], [emulated], "fp16", 0.25)
    row.systematic = systematic
    return row


def test_a_systematic_row_fails_under_the_expected_rule_only() -> None:
    row = _row(0, systematic=True)
    assert row.budget["excess_db"] < MARGIN
    assert row_diverged(row, "snr", 30.0, True, MARGIN)
    assert not row_diverged(row, "snr", 30.0, True, None)  # the threshold rule: 60 dB > 30
    assert not row_diverged(_row(0, systematic=False), "snr", 30.0, True, MARGIN)


def test_the_first_systematic_row_is_the_first_divergence() -> None:
    rows = [_row(0, False), _row(1, True), _row(2, True)]
    verdict = decide(rows, SNR(), 30.0, True, margin=MARGIN)
    assert verdict.status == FAIL
    assert verdict.first_divergence is rows[1]
    assert "repeated on every sample (2)" in verdict.reason
    assert decide(rows[:1], SNR(), 30.0, True, margin=MARGIN).status == PASS
