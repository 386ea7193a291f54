"""A sweep's exit code (issues 24.3, 36.1): a failed job 1, else a FAIL verdict 3, else a
missed accuracy budget 5; the job markers are what it counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.sweeps.callback import SweepFailedError, SweepVerdictFailedError, _exit_on_failures
from pipeline.sweeps.job_failures import MissedAccuracy, missed_accuracies, record_missed_accuracy


def test_failures_take_precedence_over_verdicts_over_accuracy() -> None:
    with pytest.raises(SweepFailedError):
        _exit_on_failures(["mlp/xnnpack"], ["mlp/xnnpack/fp32"], ["mlp/xnnpack/int8"])
    with pytest.raises(SweepVerdictFailedError) as verdict:
        _exit_on_failures([], ["mlp/xnnpack/fp32"], ["mlp/xnnpack/int8"])
    assert verdict.value.code == 3
    with pytest.raises(SweepVerdictFailedError) as accuracy:
        _exit_on_failures([], [], ["mlp/xnnpack/int8"])
    assert accuracy.value.code == 5
    _exit_on_failures([], [], [])  # nothing to report: returns


def test_missed_accuracy_markers_round_trip(tmp_path: Path) -> None:
    job = MissedAccuracy("outlier_mlp", "xnnpack", "int8", "output 0: SNR 4.6 dB < 20 dB")
    record_missed_accuracy(tmp_path / "0-job", job)
    assert missed_accuracies(tmp_path) == [job]
