"""Chrome trace event JSON (opens in Perfetto / chrome://tracing): operator lane + delegate lanes.

Delegates that log on their own clock (post-time cycles) are placed inside their DELEGATE_CALL
slice, keeping their relative offsets and converting ticks with the backend's ticks_per_ms.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.analyze.linking import (
    NS_PER_MS,
    Link,
    ProgramIndex,
    identifier_of,
    link_event,
    ops_of,
)
from stages.formats.atomic_write import write_text_atomic
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import DELEGATE_CALL_EVENT, STAMP_EVENTS

OPERATOR_LANE = 1


@dataclass
class Trace:
    """Slices before serialisation: per slice its span (ns), lane, block and its static part."""

    slices: list[tuple[float, float, int, int, int]] = field(default_factory=list)
    statics: list[tuple[str, str]] = field(default_factory=list)  # (name JSON, args tail JSON)
    blocks: list[str] = field(default_factory=list)  # block names as JSON strings
    lanes: dict[str, int] = field(default_factory=lambda: {"operators": OPERATOR_LANE})
    origin: float | None = None

    def add(self, span: tuple[float, float], lane: int, block: int, static: int) -> None:
        start = span[0]
        self.origin = start if self.origin is None else min(self.origin, start)
        self.slices.append((span[0], span[1], lane, block, static))


def _static(
    label: str,
    pe: Any,
    link: Link | None,
    ops: dict[str, list[str]],
    ident: Any,
    gaps: dict[tuple[int, ...], dict[str, Any]],
) -> tuple[str, str]:
    """The JSON of what every occurrence of one instruction shares: its label and most args."""
    handles = tuple(link.debug_handles) if link else ()
    args = {
        "event_name": pe.name,
        "instruction_id": pe.instruction_id,
        "debug_handles": list(handles),
        "op_names": ops["op_names"],
        **({"delegate_debug_identifier": ident} if ident is not None else {}),
        **gaps.get(handles, {}),
    }
    return json.dumps(label), json.dumps(args, allow_nan=False)[1:]  # "...}" without its "{"


def build_trace(
    dump: ETDumpData, index: ProgramIndex, gaps: dict[tuple[int, ...], dict[str, Any]]
) -> Trace:
    """A slice for every profile event; `gaps` maps a handle tuple to args to attach."""
    trace = Trace()
    resolved: dict[tuple[Any, ...], tuple[Link | None, int]] = {}
    for block_index, block in enumerate(dump.run_data):
        trace.blocks.append(json.dumps(block.name))
        call: tuple[float, float] | None = None
        delegate_base: float | None = None
        for event in block.events:
            pe = event.profile_event
            if pe is None or pe.name in STAMP_EVENTS:
                continue
            ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
            key = (pe.name, pe.instruction_id, ident)
            if key not in resolved:  # the same instruction recurs in every iteration
                found = link_event(index, pe.name, pe.instruction_id, ident)
                ops = ops_of(index, found.debug_handles if found else ())
                label = (
                    "+".join(ops["op_names"]) if ops["op_names"] and ident is not None else pe.name
                )
                trace.statics.append(_static(label, pe, found, ops, ident, gaps))
                resolved[key] = (found, len(trace.statics) - 1)
            link, static = resolved[key]
            start, end = float(pe.start_time), float(pe.end_time)
            if ident is None:
                if pe.name == DELEGATE_CALL_EVENT:
                    call, delegate_base = (start, end), None
                lane = OPERATOR_LANE
            else:
                ticks = index.delegate_ticks_per_ms
                if call is not None and not (call[0] <= start <= call[1]):
                    delegate_base = start if delegate_base is None else delegate_base
                    start = call[0] + (start - delegate_base) / ticks * NS_PER_MS
                    end = start + (pe.end_time - pe.start_time) / ticks * NS_PER_MS
                backend = (link.delegate_backend_name if link else "") or "delegate"
                partition = link.partition_id if link and link.partition_id is not None else 0
                lane = trace.lanes.setdefault(
                    f"{backend} partition {partition}", len(trace.lanes) + 1
                )
            trace.add((start, end), lane, block_index, static)
    return trace


def _number(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"non-finite time {value} in the trace")  # a bug, never user input
    return repr(value)


def trace_json(trace: Trace) -> str:
    """Chrome trace JSON: times from ns since the first slice to µs, plus the lane names.

    Written as text (each instruction's shared part serialised once): a 100-iteration ETDump
    has ~24,000 slices."""
    origin = trace.origin or 0.0
    meta = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "program"}}]
    meta += [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
        for name, tid in trace.lanes.items()
    ]
    parts = [json.dumps(m) for m in meta]
    statics, blocks = trace.statics, trace.blocks
    for start, end, lane, block, static in trace.slices:
        name, tail = statics[static]
        ts = _number(round((start - origin) / 1e3, 3))  # ns → µs
        dur = _number(round(max(end - start, 0.0) / 1e3, 3))
        cat = blocks[block]
        parts.append(
            f'{{"name": {name}, "cat": {cat}, "ph": "X", "ts": {ts}, "dur": {dur}, "pid": 1, '
            f'"tid": {lane}, "args": {{"event_block": {cat}, "block_index": {block}, {tail}}}'
        )
    return '{"traceEvents": [' + ", ".join(parts) + '], "displayTimeUnit": "ms"}'


def write_trace(path: Path, trace: Trace) -> None:
    write_text_atomic(path, trace_json(trace))
