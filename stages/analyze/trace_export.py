"""Chrome trace event JSON (opens in Perfetto / chrome://tracing): operator lane + delegate lanes.

Delegates that log on their own clock (post-time cycles) are placed inside their DELEGATE_CALL
slice, keeping their relative offsets and converting ticks with the backend's ticks_per_ms.
"""

from __future__ import annotations

import json
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


def build_trace(
    dump: ETDumpData, index: ProgramIndex, gaps: dict[tuple[int, ...], dict[str, Any]]
) -> dict[str, Any]:
    """traceEvents for every profile event; `gaps` maps a handle tuple to args to attach."""
    events: list[dict[str, Any]] = []
    lanes: dict[str, int] = {"operators": OPERATOR_LANE}
    origin: float | None = None
    resolved: dict[tuple[Any, ...], tuple[Link | None, dict[str, list[str]]]] = {}
    for block_index, block in enumerate(dump.run_data):
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
                resolved[key] = (found, ops_of(index, found.debug_handles if found else ()))
            link, ops = resolved[key]
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
                lane_name = f"{backend} partition {partition}"
                lane = lanes.setdefault(lane_name, len(lanes) + 1)
            origin = start if origin is None else min(origin, start)
            handles = tuple(link.debug_handles) if link else ()
            label = "+".join(ops["op_names"]) if ops["op_names"] and ident is not None else pe.name
            args = {
                "event_name": pe.name,
                "event_block": block.name,
                "block_index": block_index,
                "instruction_id": pe.instruction_id,
                "debug_handles": list(handles),
                "op_names": ops["op_names"],
                **({"delegate_debug_identifier": ident} if ident is not None else {}),
                **gaps.get(handles, {}),
            }
            events.append(_slice(label, block.name, (start, end), lane, args))
    return _trace(events, origin or 0.0, lanes)


def _slice(
    label: str, block: str, span: tuple[float, float], lane: int, args: dict[str, Any]
) -> dict[str, Any]:
    """One complete ("X") trace event in ns, placed on its lane."""
    start, end = span
    return {
        "name": label,
        "cat": block,
        "ph": "X",
        "ts": start,
        "dur": end - start,
        "pid": 1,
        "tid": lane,
        "args": args,
    }


def _trace(events: list[dict[str, Any]], origin_ns: float, lanes: dict[str, int]) -> dict[str, Any]:
    """Times from ns since the first event to µs (Chrome trace), plus the lane names."""
    for e in events:
        e["ts"] = round((e["ts"] - origin_ns) / 1e3, 3)  # ns → µs
        e["dur"] = round(max(e["dur"], 0.0) / 1e3, 3)
    meta = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "program"}}]
    meta += [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
        for name, tid in lanes.items()
    ]
    return {"traceEvents": meta + events, "displayTimeUnit": "ms"}


def write_trace(path: Path, trace: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(trace, allow_nan=False))
