"""Chrome trace event JSON (opens in Perfetto / chrome://tracing): operator lane + delegate lanes.

Delegates that log on their own clock (post-time cycles) are placed inside their DELEGATE_CALL
slice, keeping their relative offsets and converting ticks with the backend's ticks_per_ms.
Written one slice at a time from the ETDump, the first `analyze.trace_iterations` blocks of each
name (a browser cannot open a trace of a million slices).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
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
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import DELEGATE_CALL_EVENT, STAMP_EVENTS
from stages.safe_io.atomic_write import atomic_path

OPERATOR_LANE = 1


# Timed blocks of one name (ExecuTorch's 'Execute', one per iteration) the trace shows at most
# (`analyze.trace_iterations`): a browser cannot open a trace of a million slices.
DEFAULT_TRACE_ITERATIONS = 1000

KEEP_SLICES = 1 << 16  # slices the first pass keeps for the second (~6 MB); past it, re-read
WRITE_BATCH = 4096  # slices joined per write: fewer calls, bounded text in memory
Slice = tuple[float, float, int, int, int]  # start (ns), end (ns), lane, block, static


@dataclass
class Trace:
    """What trace.json shows, before serialisation: the slices come from the ETDump again on
    each pass (`slices()`), so a trace of any length is written in bounded memory."""

    dump: ETDumpData
    index: ProgramIndex
    gaps: dict[tuple[int, ...], dict[str, Any]]
    shown: list[int]  # indices of the blocks shown
    statics: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (label, args)
    lanes: dict[str, int] = field(default_factory=lambda: {"operators": OPERATOR_LANE})
    resolved: dict[tuple[Any, ...], _Instruction] = field(default_factory=dict)
    origin: float | None = None  # the earliest slice start (ns): the trace's zero
    left_out: dict[str, int] = field(default_factory=dict)  # per block name, blocks not shown
    kept: list[Slice] | None = None  # every slice, from the first pass, while KEEP_SLICES allows

    @property
    def blocks(self) -> list[str]:
        return [b.name for b in self.dump.run_data]

    def slices(self) -> Iterator[Slice]:
        """Every slice of the shown blocks, in order (instructions linked once, on first sight)."""
        if self.kept is not None:
            yield from self.kept
            return
        for block_index in self.shown:
            yield from _block_slices(self, block_index)


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


def _block_slices(trace: Trace, block_index: int) -> Iterator[Slice]:
    """The slices of one block; delegate events on their own clock placed in their call."""
    index = trace.index
    ns_per_tick = NS_PER_MS / index.delegate_ticks_per_ms
    call: tuple[float, float] | None = None
    delegate_base: float | None = None
    for event in trace.dump.run_data[block_index].events:
        pe = event.profile_event
        if pe is None or pe.name in STAMP_EVENTS:
            continue
        ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
        key = (pe.name, pe.instruction_id, ident)
        known = trace.resolved.get(key)
        if known is None:  # the same instruction recurs in every iteration
            known = trace.resolved[key] = _instruction(trace, index, pe, ident, trace.gaps)
        start, end = float(pe.start_time), float(pe.end_time)
        if known.starts_call:
            call, delegate_base = (start, end), None
        elif known.delegated and call is not None and not (call[0] <= start <= call[1]):
            delegate_base = start if delegate_base is None else delegate_base
            start = call[0] + (start - delegate_base) * ns_per_tick
            end = start + (pe.end_time - pe.start_time) * ns_per_tick
        yield start, end, known.lane, block_index, known.static


def _shown_blocks(dump: ETDumpData, iterations: int | None) -> tuple[list[int], dict[str, int]]:
    """The first `iterations` blocks of each name (all with None), and per name how many not."""
    shown: list[int] = []
    seen: dict[str, int] = {}
    left_out: dict[str, int] = {}
    for block_index, block in enumerate(dump.run_data):
        seen[block.name] = seen.get(block.name, 0) + 1
        if iterations is None or seen[block.name] <= iterations:
            shown.append(block_index)
        else:
            left_out[block.name] = left_out.get(block.name, 0) + 1
    return shown, left_out


def build_trace(
    dump: ETDumpData,
    index: ProgramIndex,
    gaps: dict[tuple[int, ...], dict[str, Any]],
    iterations: int | None = DEFAULT_TRACE_ITERATIONS,
) -> Trace:
    """A slice for every profile event of the first `iterations` blocks of each name (None:
    all); `gaps` maps a handle tuple to args to attach. One pass links the instructions and
    finds the trace's zero; `write_trace` makes the second."""
    shown, left_out = _shown_blocks(dump, iterations)
    trace = Trace(dump, index, gaps, shown, left_out=left_out)
    kept: list[Slice] | None = []
    origin: float | None = None
    for item in trace.slices():
        origin = item[0] if origin is None else min(origin, item[0])
        if kept is not None:
            kept.append(item)
            kept = kept if len(kept) <= KEEP_SLICES else None
    trace.origin, trace.kept = origin, kept
    return trace


def left_out_warning(trace: Trace, path: Path) -> str | None:
    """What the trace leaves out, for summary.json's warnings; None when it shows every block."""
    if not trace.left_out:
        return None
    names = trace.blocks
    parts = ", ".join(
        f"{names.count(name) - left} of {names.count(name)} {name!r} blocks"
        for name, left in trace.left_out.items()
    )
    return (
        f"{path} shows the first {parts} (events.csv and the timings cover them all); "
        "analyze.trace_iterations=N shows more, analyze.trace_iterations=null all"
    )


def _trace_event(trace: Trace, item: Slice, origin: float) -> dict[str, Any]:
    start, end, lane, block, static = item
    label, args = trace.statics[static]
    name = trace.dump.run_data[block].name
    return {
        "name": label,
        "cat": name,
        "ph": "X",
        "ts": round((start - origin) / 1e3, 3),
        "dur": round(max(end - start, 0.0) / 1e3, 3),
        "pid": 1,
        "tid": lane,
        "args": {"event_block": name, "block_index": block, **args},
    }


def _lane_events(trace: Trace) -> Iterator[dict[str, Any]]:
    """The process and lane names (Chrome trace metadata events)."""
    yield {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "program"}}
    for name, tid in trace.lanes.items():
        yield {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}


def trace_events(trace: Trace) -> Iterator[dict[str, Any]]:
    """The Chrome trace's events: lane names, then slices with times from ns since the first
    slice to µs (3 decimals)."""
    origin = trace.origin or 0.0
    yield from _lane_events(trace)
    for item in trace.slices():
        yield _trace_event(trace, item, origin)


class _SliceText:
    """Each slice's JSON text, as `json.dumps` of `_trace_event` writes it, from parts encoded
    once per (block name, instruction): 24 k slices cost string joins, not 24 k encodes."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.encode = json.JSONEncoder(allow_nan=False).encode
        self.parts: dict[str, dict[int, tuple[str, str, str] | None]] = {}  # by block name
        self.block, self.block_name = -1, ""  # the last slice's block, its name and parts
        self.block_parts: dict[int, tuple[str, str, str] | None] = {}

    def _parts(self, static: int, block_name: str) -> tuple[str, str, str] | None:
        """The text before `ts`, before the block index and after it; None when the merged
        args would reorder (then the slice is encoded whole)."""
        label, args = self.trace.statics[static]
        if "event_block" in args or "block_index" in args:
            return None
        name = self.encode(block_name)
        head = f'{{"name": {self.encode(label)}, "cat": {name}, "ph": "X", "ts": '
        rest = self.encode(args)
        tail = f", {rest[1:]}}}" if len(rest) > 2 else "}}"
        return head, f'"args": {{"event_block": {name}, "block_index": ', tail

    def text(self, item: Slice, origin: float) -> str:
        start, end, lane, block, static = item
        if block != self.block:
            self.block, self.block_name = block, self.trace.dump.run_data[block].name
            self.block_parts = self.parts.setdefault(self.block_name, {})
        if static not in self.block_parts:
            self.block_parts[static] = self._parts(static, self.block_name)
        parts = self.block_parts[static]
        if parts is None:
            return self.encode(_trace_event(self.trace, item, origin))
        # µs at 3 decimals, as round(ns / 1e3, 3) gives; a whole number of ns needs no rounding
        ts, dur = start - origin, max(end - start, 0.0)
        ts = ts / 1e3 if ts.is_integer() else round(ts / 1e3, 3)
        dur = dur / 1e3 if dur.is_integer() else round(dur / 1e3, 3)
        if not math.isfinite(ts + dur):  # a bug, never written (as json's allow_nan=False)
            raise ValueError(f"trace.json: a slice at {start!r}..{end!r} ns is not finite")
        head, before_block, tail = parts
        return f'{head}{ts!r}, "dur": {dur!r}, "pid": 1, "tid": {lane}, {before_block}{block}{tail}'


def write_trace(path: Path, trace: Trace) -> None:
    """trace.json, written atomically one event at a time (what `json.dump` of the whole
    `{"traceEvents": [...], "displayTimeUnit": "ms"}` writes); a non-finite time or gap value
    is a bug, never written."""
    encode = json.JSONEncoder(allow_nan=False).encode
    slice_text = _SliceText(trace)
    origin = trace.origin or 0.0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        fh.write('{"traceEvents": [')
        fh.write(", ".join(encode(event) for event in _lane_events(trace)))
        batch: list[str] = []
        for item in trace.slices():
            batch.append(slice_text.text(item, origin))
            if len(batch) >= WRITE_BATCH:
                fh.write(", " + ", ".join(batch))
                batch.clear()
        fh.write(", " + ", ".join(batch) if batch else "")
        fh.write('], "displayTimeUnit": "ms"}')
