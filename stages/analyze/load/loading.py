"""Load what the analysis reads: the ETDump, and optionally the debug buffer and the ETRecord."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stages.formats.etdump import DebugBuffer, ETDumpData
from stages.formats.etdump.records import ETDumpError
from stages.formats.etdump.streaming import open_etdump
from stages.formats.etrecord import ETRecord
from stages.handover.debug_buffer import load_debug_buffer
from stages.handover.etrecord import load_etrecord


class AnalyzeInputError(Exception):
    """An input file of the analysis is missing or unreadable; the message says which and why."""


@dataclass(frozen=True)
class AnalysisInputs:
    etdump: ETDumpData
    etdump_path: Path
    debug_buffer: DebugBuffer | None
    debug_buffer_path: Path | None
    etrecord: ETRecord | None
    etrecord_path: Path | None


def load_inputs(
    etdump: Path,
    debug_buffer: Path | None,
    etrecord: Path | None,
    method: str | None = None,
    exported_program: Path | None = None,
) -> AnalysisInputs:
    """Read the three files (the buffer's trailer verified); an absent one is simply None.
    `method`: which method of the ETRecord to read (several-method programs).
    `exported_program`: the program an ETRecord refers to by hash (default: beside it)."""
    if not Path(etdump).is_file():
        raise AnalyzeInputError(
            f"analyze.etdump={etdump}: no such file; run the run stage first or pass "
            "analyze.etdump=PATH to an ETDump"
        )
    try:
        dump = open_etdump(etdump)  # events decoded on each pass: memory bounded at any size
    except ETDumpError as exc:
        raise AnalyzeInputError(f"analyze.etdump: {exc}") from exc
    buffer = None
    if debug_buffer is not None:
        try:
            buffer = load_debug_buffer(Path(debug_buffer))
        except ETDumpError as exc:
            raise AnalyzeInputError(f"analyze.debug_buffer: {exc}") from exc
    record = (
        load_etrecord(etrecord, method, program=exported_program) if etrecord is not None else None
    )
    return AnalysisInputs(dump, Path(etdump), buffer, debug_buffer, record, etrecord)
