"""Warnings about inputs that load but give little: no profiling events, an ETRecord that
links nothing. Said in summary.json `warnings` (and so the report and terminal), never silent."""

from __future__ import annotations

from stages.analyze.link.linking import ProgramIndex
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import STAMP_EVENTS


def input_warnings(
    dump: ETDumpData, index: ProgramIndex, etdump: str, etrecord: str, has_etrecord: bool
) -> list[str]:
    """What the analysed files lack, each naming the file and what to do."""
    warnings = []
    profiled = any(
        e.profile_event is not None and e.profile_event.name not in STAMP_EVENTS
        for b in dump.run_data
        for e in b.events
    )
    if not profiled:
        logged = sum(e.debug_event is not None for b in dump.run_data for e in b.events)
        warnings.append(
            f"{etdump} holds no profiling events ({logged} debug events): events.csv and the "
            "timings are empty; write the ETDump with profiling on (ExecuTorch: enable_etdump=True "
            "runs the method with an ETDumpGen that profiles)"
        )
    if has_etrecord and not index.linked:
        warnings.append(
            f"{etrecord} links nothing: its reference program carries no debug handles (an "
            "ETRecord written before to_executorch(), or without generate_etrecord=True), so "
            "events are not tied to ops and no numeric gap is computed"
        )
    return warnings
