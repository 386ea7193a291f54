"""Profile events → one row per event per event block, with stats over iterations.

Blocks of the same name (ExecuTorch writes one 'Execute' block per execution) are merged; an
event is matched across them by (name, instruction, delegate identifier, occurrence).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.analyze.config import UNITS_PER_MS
from stages.analyze.link.latency_stats import DEFAULT_EXACT_SAMPLES, LatencyStats
from stages.analyze.link.linking import (
    NS_PER_MS,
    Link,
    MetadataParser,
    ProgramIndex,
    identifier_of,
    link_event,
    ops_of,
)
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import STAMP_EVENTS
from stages.safe_io.atomic_write import atomic_path

TIME_UNITS = UNITS_PER_MS
EVENT_COLUMNS = (
    "event_block_name",
    "event_name",
    "p10",
    "p50",
    "p90",
    "avg",
    "min",
    "max",
    "op_types",
    "delegate_debug_identifier",
    "debug_handles",
    "is_delegated_op",
    "delegate_backend_name",
    "stack_traces",
    "module_hierarchy",
    "delegate_debug_metadatas",
    "op_names",
    "count",
    "time_unit",
    "instruction_id",
    "link_source",
    "method",
)


class TimeUnitError(ValueError):
    """analyze.time_unit is not one of the known units."""


@dataclass
class EventRow:
    """One event of the program across iterations: its link, and its latencies in bounded
    memory (`LatencyStats`); the parsed delegate metadata of its first occurrences."""

    event_block_name: str
    event_name: str
    instruction_id: int
    link: Link
    latencies: LatencyStats = field(default_factory=LatencyStats)
    metadatas: list[dict[str, Any]] = field(default_factory=list)
    ops: dict[str, list[str]] = field(default_factory=dict)
    method: str = ""  # the program method the block ran (several-method programs)

    @property
    def count(self) -> int:
        return self.latencies.count

    def stat(self, name: str) -> float:
        """avg, min, max, p10, p50 or p90 of the row's durations."""
        return self.latencies.stat(name)


def unit_factor(unit: str) -> float:
    if unit not in TIME_UNITS:
        raise TimeUnitError(f"analyze.time_unit={unit!r}: choose one of {sorted(TIME_UNITS)}")
    return TIME_UNITS[unit]


def build_event_rows(
    dump: ETDumpData,
    index: ProgramIndex,
    parser: MetadataParser | None,
    unit: str = "ms",
    method: str = "",
    exact_samples: int = DEFAULT_EXACT_SAMPLES,
) -> list[EventRow]:
    """Rows in first-seen order; durations converted from each clock to `unit`. `dump` holds
    one method's blocks (`method` names it), as instruction ids overlap across methods. A row
    keeps `exact_samples` durations and as many parsed metadatas; past them a sketch of the
    durations (`LatencyStats`), so memory does not grow with the iterations."""
    factor = unit_factor(unit)
    rows: dict[tuple[Any, ...], EventRow] = {}
    for block in dump.run_data:
        seen: dict[tuple[Any, ...], int] = {}
        for event in block.events:
            pe = event.profile_event
            if pe is None or pe.name in STAMP_EVENTS:
                continue
            ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
            base = (block.name, pe.name, pe.instruction_id, ident)
            occurrence = seen.get(base, 0)
            seen[base] = occurrence + 1
            key = (*base, occurrence)
            row = rows.get(key)
            if row is None:
                link = link_event(index, pe.name, pe.instruction_id, ident) or Link(
                    delegate_debug_identifier=ident, is_delegated_op=ident is not None
                )
                # ExecuTorch's XNNPACK logs no name, only a string identifier: show that.
                row = rows[key] = EventRow(
                    block.name,
                    pe.name or (str(ident) if ident is not None else ""),
                    pe.instruction_id,
                    link,
                    LatencyStats(exact_samples),
                    ops=ops_of(index, link.debug_handles),
                    method=method,
                )
            ticks = index.delegate_ticks_per_ms if ident is not None else NS_PER_MS
            row.latencies.add((pe.end_time - pe.start_time) / ticks * factor)
            if (
                pe.delegate_debug_metadata
                and parser is not None
                and len(row.metadatas) < exact_samples
            ):
                row.metadatas.append(parser(pe.delegate_debug_metadata))
    return list(rows.values())


def _cell(value: Any) -> str:
    if isinstance(value, list | tuple | dict):
        return json.dumps(value)
    return "" if value is None else str(value)


def event_record(row: EventRow, unit: str) -> dict[str, Any]:
    link = row.link
    record: dict[str, Any] = {
        "event_block_name": row.event_block_name,
        "event_name": row.event_name,
        **row.latencies.stats(),
        "op_types": row.ops.get("op_types", []),
        "delegate_debug_identifier": link.delegate_debug_identifier,
        "debug_handles": list(link.debug_handles),
        "is_delegated_op": link.is_delegated_op,
        "delegate_backend_name": link.delegate_backend_name,
        "stack_traces": row.ops.get("stack_traces", []),
        "module_hierarchy": row.ops.get("module_hierarchy", []),
        "delegate_debug_metadatas": row.metadatas,
        "op_names": row.ops.get("op_names", []),
        "count": row.count,
        "time_unit": unit,
        "instruction_id": row.instruction_id,
        # map (the ETRecord's / delegate's own), recovered (xnnpack_recovery) or none
        "link_source": link.link_source if link.debug_handles else "none",
        "method": row.method,
    }
    return record


def write_csv(
    path: Path,
    columns: tuple[str, ...],
    records: list[dict[str, Any]],
    cell: Callable[[Any], str] = _cell,
) -> None:
    """Write atomically; lists and dicts become JSON, None an empty cell."""
    with atomic_path(path) as tmp, tmp.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for record in records:
            writer.writerow([cell(record.get(c)) for c in columns])
