"""inputs.json, which the export stage writes beside inputs.pt and the analysis copies into
summary.json's `inputs`: which samples calibrated int8 and which were run and judged; read
bounded, and told in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stages.formats.artifacts import ArtifactName

MAX_RECORD_BYTES = 1 << 20  # the record is a few hundred bytes; a bigger file is not ours


def inputs_record(beside: Path | None) -> dict[str, Any] | None:
    """The record in the directory of `beside` (the ETRecord, inputs.pt), or None (no such file,
    or not a readable record)."""
    if beside is None:
        return None
    path = beside.parent / ArtifactName.INPUTS_RECORD
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "evaluation" in record else None


def inputs_line(record: Any) -> str:
    """'inputs: …' saying which samples were judged and which calibrated int8, or ''."""
    if not isinstance(record, dict):
        return ""
    try:
        evaluation, calibration = record["evaluation"], record["calibration"]
        judged = (
            f"{evaluation['count']} evaluation sample(s) from {record['source']} ({record['from']})"
        )
        if record.get("calibrated_on_evaluation"):
            return f"inputs: {judged}; int8 calibrated on these same evaluation samples"
        start, stop = calibration["indices"]
        return (
            f"inputs: {judged}; int8 calibrated on {calibration['count']} others [{start}, {stop})"
        )
    except (KeyError, TypeError, ValueError):
        return ""


def calibration_file(inputs: Path) -> Path:
    """The samples int8 calibrates on: calibration_inputs.pt beside `inputs` when the record
    beside it (written with it by the same export) says they are other samples, else `inputs`.
    A calibration file an earlier export left in a reused run dir is so never taken."""
    record = inputs_record(inputs)  # the record beside inputs.pt, as beside the ETRecord
    separate = inputs.parent / ArtifactName.CALIBRATION_INPUTS
    if record is None or record.get("calibrated_on_evaluation", True) or not separate.is_file():
        return inputs
    return separate
