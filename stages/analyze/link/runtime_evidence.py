"""The runtime's own evidence checked against itself: its kernels' clock against its delegate
calls, its logged outputs' shapes against the ops their identifiers map to."""

from __future__ import annotations

from stages.analyze.link.clock_check import check_clocks
from stages.analyze.link.linking import ProgramIndex
from stages.analyze.link.logged_shapes import check_logged_shapes
from stages.backends.delegate_map_findings import MapFinding
from stages.formats.etdump import ETDumpData
from stages.formats.etrecord import ETRecord
from stages.handover.etrecord import etrecord_program


def runtime_evidence(
    dump: ETDumpData, index: ProgramIndex, record: ETRecord | None
) -> list[MapFinding]:
    """`clock_mismatch` and `shape_mismatch` findings (none without an ETRecord to check by)."""
    if record is None or not index.maps:
        return []
    # A cost model's cycles are not the host's time: nothing to check them against.
    modelled = bool(record.lowering_info.get("timed_by_cost_model"))
    clocks = [] if modelled else check_clocks(dump, index)
    return clocks + check_logged_shapes(dump, index, lambda: etrecord_program(record))
