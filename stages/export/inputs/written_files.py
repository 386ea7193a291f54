"""The export stage's sample files beyond inputs.pt: calibration_inputs.pt (only when int8
calibrates on other samples), labels.pt (only when the samples carry labels) and inputs.json
(always); a file from an earlier export in the same run dir that this one does not write goes."""

from __future__ import annotations

import logging
from pathlib import Path

from stages.export.inputs.selection import SelectedInputs
from stages.formats.artifacts import ArtifactName
from stages.formats.inputs_record import inputs_line
from stages.formats.samples import write_samples
from stages.handover.samples import save_samples
from stages.safe_io.json_text import write_json_atomic

log = logging.getLogger(__name__)


def write_inputs_files(
    selected: SelectedInputs, run_dir: Path
) -> tuple[Path | None, Path | None, Path]:
    """(calibration_inputs.pt or None, labels.pt or None, inputs.json), written atomically."""
    calibration = run_dir / ArtifactName.CALIBRATION_INPUTS
    labels = run_dir / ArtifactName.LABELS
    record = run_dir / ArtifactName.INPUTS_RECORD
    if selected.calibration:
        save_samples(selected.calibration, calibration)
    else:
        calibration.unlink(missing_ok=True)
    if selected.labels is not None:
        write_samples([(label,) for label in selected.labels], labels)
    else:
        labels.unlink(missing_ok=True)
    write_json_atomic(record, selected.record, indent=2)
    for note in selected.record.get("notes", []):
        log.warning("[export] %s", note)
    log.info("[export] %s", inputs_line(selected.record))
    return (
        calibration if selected.calibration else None,
        labels if selected.labels is not None else None,
        record,
    )
