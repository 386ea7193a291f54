"""The samples the lower stage calibrated int8 on, for the expected error at each op: the
calibration_inputs.pt beside the ETRecord when its inputs.json says the export calibrated on
other samples (`inputs.calibration`, or real data split by default), else the evaluation ones."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stages.formats.artifacts import ArtifactName
from stages.formats.inputs_record import calibration_file
from stages.handover.samples import load_samples


def calibration_samples(etrecord: Path | None, evaluation: Sequence[Any]) -> list[Any]:
    """The calibration samples beside `etrecord`, or `evaluation` when they are the same."""
    if etrecord is None:
        return list(evaluation)
    inputs = etrecord.parent / ArtifactName.INPUTS
    calibration = calibration_file(inputs)
    return list(evaluation) if calibration == inputs else load_samples(calibration)
