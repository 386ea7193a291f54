"""inputs.json: read bounded, told in one line, and the only way lower picks calibration samples
other than inputs.pt (a calibration file an earlier export left behind is never taken)."""

from __future__ import annotations

import json
from pathlib import Path

from stages.formats.artifacts import ArtifactName
from stages.formats.inputs_record import (
    MAX_RECORD_BYTES,
    calibration_file,
    inputs_line,
    inputs_record,
)

SPLIT = {
    "source": "files",
    "from": "inputs.path=data",
    "evaluation": {"count": 16, "indices": [32, 48]},
    "calibration": {"count": 32, "indices": [0, 32]},
    "calibrated_on_evaluation": False,
}


def _write(run: Path, record: object, calibration: bool = True) -> Path:
    run.mkdir(exist_ok=True)
    (run / ArtifactName.INPUTS_RECORD).write_text(json.dumps(record))
    if calibration:
        (run / ArtifactName.CALIBRATION_INPUTS).write_bytes(b"samples")
    return run / ArtifactName.INPUTS


def test_calibration_file_follows_the_record(tmp_path: Path) -> None:
    inputs = _write(tmp_path / "split", SPLIT)
    assert calibration_file(inputs) == inputs.parent / ArtifactName.CALIBRATION_INPUTS
    stale = _write(tmp_path / "stale", {**SPLIT, "calibrated_on_evaluation": True})
    assert calibration_file(stale) == stale
    assert calibration_file(_write(tmp_path / "gone", SPLIT, calibration=False)).name == "inputs.pt"
    assert calibration_file(tmp_path / "none" / "inputs.pt").name == "inputs.pt"


def test_a_record_is_read_bounded_and_told_in_one_line(tmp_path: Path) -> None:
    inputs = _write(tmp_path / "split", SPLIT)
    assert inputs_line(inputs_record(inputs)) == (
        "inputs: 16 evaluation sample(s) from files (inputs.path=data); "
        "int8 calibrated on 32 others [0, 32)"
    )
    big = tmp_path / "big"
    big.mkdir()
    (big / ArtifactName.INPUTS_RECORD).write_text(" " * (MAX_RECORD_BYTES + 1) + "{}")
    assert inputs_record(big / "etrecord.zip") is None
    assert inputs_record(_write(tmp_path / "list", [1, 2])) is None
    assert inputs_line({"evaluation": {}}) == ""  # a record missing fields says nothing
