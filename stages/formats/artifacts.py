"""Reserved artifact file names in a run directory; every stage uses these, never literals."""

from enum import StrEnum
from pathlib import Path


class ArtifactName(StrEnum):
    """File names the stages write into the run directory."""

    EXPORTED_PROGRAM = "exported.pt2"
    INPUTS = "inputs.pt"
    # inputs=files|loader (or inputs.calibration=N): the samples int8 calibrates on, when they
    # are not the evaluation samples of inputs.pt; and the evaluation samples' labels, aligned
    # with inputs.pt (one 1-tuple (label,) per sample), when the data carry labels.
    CALIBRATION_INPUTS = "calibration_inputs.pt"
    LABELS = "labels.pt"
    # Which samples calibrated and which were judged (summary.json's `inputs`).
    INPUTS_RECORD = "inputs.json"
    REFERENCE_OUTPUTS = "reference_outputs.pt"
    ETRECORD = "etrecord.zip"
    # Our lowered program (a zip with a JSON instruction list); `.pte` is only ever ExecuTorch's.
    PROGRAM = "lowered_program.zip"
    # ExecuTorch's own flatbuffer program, written by the executorch_* backends.
    EXECUTORCH_PROGRAM = "program.pte"
    LOWERING_REPORT = "lowering.json"
    ETDUMP = "etdump.etdp"
    DEBUG_BUFFER = "debug.bin"
    RUN_OUTPUTS = "run_outputs.pt"
    # Generation (runtime.generate.*): the program's cache layout and the run's length (export),
    # and the inputs of the steps that captured intermediate outputs (run).
    GENERATION = "generation.json"
    STEP_INPUTS = "step_inputs.pt"
    # runtime.observe=tap (executorch_*): the instrumented program and its tap points (lower),
    # and what instrumentation changed and which tapped values were refused (run).
    TAP_PROGRAM = "program_tap.pte"
    TAP_MANIFEST = "taps.json"
    INSTRUMENTATION = "instrumentation.json"
    EVENTS_CSV = "events.csv"
    NUMERIC_GAP_CSV = "numeric_gap.csv"
    SUMMARY_JSON = "summary.json"
    TRACE_JSON = "trace.json"
    REPORT_HTML = "report.html"


# Names earlier versions of this tool wrote, for a clear message in old run dirs.
LEGACY_NAMES: dict[ArtifactName, str] = {ArtifactName.PROGRAM: "program.pte"}


def legacy_hint(path: Path) -> str:
    """' (<old> is there: ...)' when a missing artifact exists under its old name, else ''."""
    for name, old in LEGACY_NAMES.items():
        legacy = path.parent / old
        if path.name == name and legacy.is_file() and legacy.read_bytes()[:2] == b"PK":
            return (
                f" ({legacy} is the same artifact under the name earlier versions "
                f"used; re-run the lower stage to write {name}, or rename the file)"
            )
    return ""
