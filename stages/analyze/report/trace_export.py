"""Chrome trace event JSON (opens in Perfetto / chrome://tracing): operator lane + delegate lanes.

Delegates that log on their own clock (post-time cycles) are placed inside their DELEGATE_CALL
slice, keeping their relative offsets and converting ticks with the backend's ticks_per_ms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.analyze.link.linking import (
    NS_PER_MS,
    Link,
    ProgramIndex,
    identifier_of,
    link_event,
    ops_of,
)
from stages.formats.atomic_write import atomic_path
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import DELEGATE_CALL_EVENT, STAMP_EVENTS

OPERATOR_LANE = 1


@dataclass
class Trace:
    """Slices before serialisation: per slice its span (ns), lane, block and its static part."""

    slices: list[tuple[float, float, int, int, int]] = field(default_factory=list)
    statics: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (label, args)
    blocks: list[str] = field(default_factory=list)  # block names
    lanes: dict[str, int] = field(default_factory=lambda: {"operators": OPERATOR_LANE})

    @property
    def origin(self) -> float | None:
        """The earliest slice start (ns): the trace's zero."""
        return min((s[0] for s in self.slices), default=None)


def _static(
    label: str,
    pe: Any,
    link: Link | None,
    ops: dict[str, list[str]],
    ident: Any,
    gaps: dict[tuple[int, ...], dict[str, Any]],
) -> tuple[str, dict[str, Any]]:
    """What every occurrence of one instruction shares: its label and most args."""
    handles = tuple(link.debug_handles) if link else ()
    args = {
        "event_name": pe.name,
        "instruction_id": pe.instruction_id,
        "debug_handles": list(handles),
        "op_names": ops["op_names"],
        "link_source": link.link_source if link and handles else "none",
        **({"delegate_debug_identifier": ident} if ident is not None else {}),
        **gaps.get(handles, {}),
    }
    return label, args


@dataclass(frozen=True)
class _Instruction:
    """What every occurrence of one (event name, instruction, identifier) shares."""

    static: int
    lane: int
    delegated: bool
    starts_call: bool


def _instruction(
    trace: Trace,
    index: ProgramIndex,
    pe: Any,
    ident: Any,
    gaps: dict[tuple[int, ...], dict[str, Any]],
) -> _Instruction:
    """Link one instruction's event once: its label, args and lane."""
    found = link_event(index, pe.name, pe.instruction_id, ident)
    ops = ops_of(index, found.debug_handles if found else ())
    label = "+".join(ops["op_names"]) if ops["op_names"] and ident is not None else pe.name
    label = label or str(ident or "")  # ExecuTorch's XNNPACK names kernels by identifier only
    trace.statics.append(_static(label, pe, found, ops, ident, gaps))
    lane = OPERATOR_LANE
    if ident is not None:
        backend = (found.delegate_backend_name if found else "") or "delegate"
        partition = found.partition_id if found and found.partition_id is not None else 0
        lane = trace.lanes.setdefault(f"{backend} partition {partition}", len(trace.lanes) + 1)
    return _Instruction(
        len(trace.statics) - 1,
        lane,
        ident is not None,
        ident is None and pe.name == DELEGATE_CALL_EVENT,
    )


def build_trace(
    dump: ETDumpData, index: ProgramIndex, gaps: dict[tuple[int, ...], dict[str, Any]]
) -> Trace:
    """A slice for every profile event; `gaps` maps a handle tuple to args to attach."""
    trace = Trace()
    resolved: dict[tuple[Any, ...], _Instruction] = {}
    ns_per_tick = NS_PER_MS / index.delegate_ticks_per_ms
    add = trace.slices.append
    for block_index, block in enumerate(dump.run_data):
        trace.blocks.append(block.name)
        call: tuple[float, float] | None = None
        delegate_base: float | None = None
        for event in block.events:
            pe = event.profile_event
            if pe is None or pe.name in STAMP_EVENTS:
                continue
            ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
            key = (pe.name, pe.instruction_id, ident)
            known = resolved.get(key)
            if known is None:  # the same instruction recurs in every iteration
                known = resolved[key] = _instruction(trace, index, pe, ident, gaps)
            start, end = float(pe.start_time), float(pe.end_time)
            if known.starts_call:
                call, delegate_base = (start, end), None
            elif known.delegated and call is not None and not (call[0] <= start <= call[1]):
                delegate_base = start if delegate_base is None else delegate_base
                start = call[0] + (start - delegate_base) * ns_per_tick
                end = start + (pe.end_time - pe.start_time) * ns_per_tick
            add((start, end, known.lane, block_index, known.static))
    return trace


def trace_events(trace: Trace) -> dict[str, Any]:
    """The Chrome trace: times from ns since the first slice to µs (3 decimals), lane names."""
    origin = trace.origin or 0.0
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "program"}}
    ]
    events += [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
        for name, tid in trace.lanes.items()
    ]
    for start, end, lane, block, static in trace.slices:
        label, args = trace.statics[static]
        events.append(
            {
                "name": label,
                "cat": trace.blocks[block],
                "ph": "X",
                "ts": round((start - origin) / 1e3, 3),
                "dur": round(max(end - start, 0.0) / 1e3, 3),
                "pid": 1,
                "tid": lane,
                "args": {"event_block": trace.blocks[block], "block_index": block, **args},
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_trace(path: Path, trace: Trace) -> None:
    """trace.json, written atomically; a non-finite time or gap value is a bug, never written."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        json.dump(trace_events(trace), fh, allow_nan=False)
