"""Reserved artifact file names in a run directory; every stage uses these, never literals."""

from enum import StrEnum


class ArtifactName(StrEnum):
    """File names the stages write into the run directory."""

    EXPORTED_PROGRAM = "exported.pt2"
    INPUTS = "inputs.pt"
    REFERENCE_OUTPUTS = "reference_outputs.pt"
    ETRECORD = "etrecord.zip"
    PROGRAM = "program.pte"
    LOWERING_REPORT = "lowering.json"
    ETDUMP = "etdump.etdp"
    DEBUG_BUFFER = "debug.bin"
    RUN_OUTPUTS = "run_outputs.pt"
    EVENTS_CSV = "events.csv"
    NUMERIC_GAP_CSV = "numeric_gap.csv"
    SUMMARY_JSON = "summary.json"
    TRACE_JSON = "trace.json"
    REPORT_HTML = "report.html"
