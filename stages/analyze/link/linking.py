"""Link runtime events to the model: instruction / delegate identifier → debug handles → ops.

Operator events carry the instruction id (as in ExecuTorch); the ETRecord's lowering info maps
operator instructions to handles and delegate instructions to partitions, whose debug-handle maps
resolve delegate identifiers. Anything that does not resolve is a mismatch, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stages.analyze.link.source_frames import model_source_line
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import (
    FINGERPRINT_EVENT,
    STAMP_EVENTS,
    DebugEvent,
    Event,
    ValueRecord,
    read_stamp,
)
from stages.formats.etrecord import DelegateMapRecord, ETRecord, HandleInfo
from stages.formats.etrecord_types import (
    OWN_MAP,
    RECOVERED_MAP,
    TAP_LINK,
    tap_identifier_handles,
)
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier

NS_PER_MS = 1e6
# ExecuTorch's runtime events around a whole method: they stand for no operator.
FRAMEWORK_EVENTS = frozenset({"Method::init", "Program::load_method", "Method::execute"})

MetadataParser = Callable[[bytes], dict[str, Any]]


class ProgramMismatchError(Exception):
    """Files analysed together that do not belong together (ETDump, ETRecord, debug buffer)."""


QDQ_ATTRIBUTION = "qdq_handle_attribution"


@dataclass(frozen=True)
class ProgramIndex:
    """What the ETRecord says about the lowered program, indexed for lookups."""

    handles: dict[DebugHandle, HandleInfo]
    instruction_handles: dict[int, tuple[DebugHandle, ...]]
    delegate_instructions: dict[int, DelegateMapRecord]
    maps: tuple[DelegateMapRecord, ...]
    backend: str
    precision: str
    delegate_ticks_per_ms: float
    lowered_fingerprint: str | None
    # How many of an instruction's logged values are its outputs (ExecuTorch logs a delegate
    # call's inputs too); absent: every logged value is an output.
    instruction_outputs: dict[int, int] = field(default_factory=dict)
    # Handles only quantize/dequantize ops carried → the op they serve (an int8 program read
    # against its fp32 reference: stages.formats.float_reference).
    handle_attribution: dict[int, int] = field(default_factory=dict)
    # What the runtime is compared with, when the ETRecord names it (ExecuTorch's: which graph).
    reference_graph: str = ""
    # Instructions that only re-point a tensor (ExecuTorch's `et_view`, from the .pte): their
    # events stand for no operator (stages.formats.executorch.views).
    view_instructions: frozenset[int] = frozenset()

    @classmethod
    def empty(cls) -> ProgramIndex:
        return cls({}, {}, {}, (), "", "fp32", NS_PER_MS, None)

    @classmethod
    def from_etrecord(cls, record: ETRecord) -> ProgramIndex:
        info = record.lowering_info
        by_partition = {m.partition_id: m for m in record.delegate_maps}
        delegate_instructions = {
            int(i): by_partition[int(p)]
            for i, p in dict(info.get("delegate_instructions", {})).items()
            if int(p) in by_partition
        }
        return cls(
            handles=record.handles,
            instruction_handles={
                int(i): _handle_tuple(h)
                for i, h in dict(info.get("instruction_debug_handles", {})).items()
            },
            delegate_instructions=delegate_instructions,
            maps=tuple(record.delegate_maps),
            backend=str(info.get("backend", "")),
            precision=str(info.get("precision", "fp32")),
            delegate_ticks_per_ms=float(info.get("ticks_per_ms", NS_PER_MS)),
            lowered_fingerprint=info.get("lowered_program_fingerprint"),
            instruction_outputs={
                int(i): int(n) for i, n in dict(info.get("instruction_num_outputs", {})).items()
            },
            handle_attribution={
                int(h): int(t) for h, t in dict(info.get(QDQ_ATTRIBUTION, {})).items()
            },
            reference_graph=str(info.get("reference_graph", "")),
        )

    @property
    def linked(self) -> bool:
        return bool(self.handles)


def _handle_tuple(value: Any) -> tuple[DebugHandle, ...]:
    """Our lowering info maps an instruction to one handle, ExecuTorch's to a list."""
    return tuple(int(h) for h in value) if isinstance(value, list | tuple) else (int(value),)


@dataclass(frozen=True)
class Link:
    """What one event stands for in the model."""

    debug_handles: tuple[DebugHandle, ...] = ()
    is_delegated_op: bool = False
    delegate_backend_name: str = ""
    delegate_debug_identifier: DelegateIdentifier | None = None
    partition_id: int | None = None
    # "map": the ETRecord's or the delegate's own map; "recovered": the analysis's recovery.
    link_source: str = OWN_MAP


def identifier_of(id_int: int, id_str: str) -> DelegateIdentifier | None:
    """ExecuTorch's convention: int id -1 and empty string both mean 'not a delegate event'."""
    if id_str:
        return id_str
    return id_int if id_int != -1 else None


def link_event(
    index: ProgramIndex, name: str, instruction_id: int, identifier: DelegateIdentifier | None
) -> Link | None:
    """The link for one event; None when the index knows the program but not this event."""
    if name in FRAMEWORK_EVENTS:
        return Link()
    if identifier is not None:
        record = index.delegate_instructions.get(instruction_id)
        tapped = tap_identifier_handles(identifier)
        if tapped is not None and record is not None:  # runtime.observe=tap: the handles it names
            remapped = tuple(index.handle_attribution.get(h, h) for h in tapped)
            return Link(
                remapped, True, record.backend_name, identifier, record.partition_id, TAP_LINK
            )
        candidates = [record] if record is not None else list(index.maps)
        for m in candidates:
            if identifier in m.debug_handle_map:
                return Link(
                    tuple(m.debug_handle_map[identifier]),
                    True,
                    m.backend_name,
                    identifier,
                    m.partition_id,
                    m.map_source,
                )
        if record is not None:
            # The backend emitted no identifier map (ExecuTorch 1.5.1's XNNPACK), a map that
            # lacks this identifier (an `unmapped_identifier` finding, stages.analyze.link.
            # map_check), or recovery could not place this kernel (xnnpack_recovery): the event
            # belongs to its delegate call, to none of its ops in particular.
            return Link((), True, record.backend_name, identifier, record.partition_id)
        return (
            None
            if index.linked
            else Link(delegate_debug_identifier=identifier, is_delegated_op=True)
        )
    if instruction_id in index.delegate_instructions:
        m = index.delegate_instructions[instruction_id]
        # Without an identifier map no inner event names ops: the call itself stands for its
        # partition's ops (as in ExecuTorch's Inspector); with one, the inner events do.
        own_map = bool(m.debug_handle_map) and m.map_source != RECOVERED_MAP
        partition = () if own_map else m.delegated_handles
        return Link(partition, delegate_backend_name=m.backend_name, partition_id=m.partition_id)
    if instruction_id < 0 or not index.linked or instruction_id in index.view_instructions:
        return Link()
    handles = index.instruction_handles.get(instruction_id)
    return Link(handles) if handles is not None else None


def logged_outputs(
    events: Sequence[Event], index: ProgramIndex
) -> list[tuple[int, DebugEvent, list[ValueRecord]]]:
    """(position, event, output values) per logged instruction output in one event block.

    A consecutive run of debug events of one instruction (and identifier) is one execution of
    it: ExecuTorch logs each output of a multi-output op as its own event, and a delegate
    call's inputs before its outputs. Where the ETRecord says how many values are outputs, only
    that many trailing values are kept. Program outputs are left out.
    """
    found: list[tuple[int, DebugEvent, list[ValueRecord]]] = []
    run: list[tuple[int, DebugEvent]] = []

    def flush() -> None:
        if not run:
            return
        wanted = index.instruction_outputs.get(run[0][1].instruction_id, len(run))
        kept = run[-wanted:] if wanted > 0 else []
        values = [de.debug_entry for _, de in kept if de.debug_entry is not None]
        if kept and values:
            found.append((kept[-1][0], kept[-1][1], values))
        run.clear()

    for position, event in enumerate(events):
        de = event.debug_event
        if de is None:
            continue  # profile events between a run's debug events do not end the run
        if de.instruction_id < 0 or (de.debug_entry is not None and de.debug_entry.output):
            continue
        if run and _debug_key(run[-1][1]) != _debug_key(de):
            flush()
        run.append((position, de))
    flush()
    return found


def _debug_key(de: DebugEvent) -> tuple[int, DelegateIdentifier | None]:
    return de.instruction_id, identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)


def ops_of(index: ProgramIndex, handles: Iterable[DebugHandle]) -> dict[str, list[str]]:
    """op names, op types, stack traces and module paths of handles, in handle order."""
    out: dict[str, list[str]] = {
        "op_names": [],
        "op_types": [],
        "stack_traces": [],
        "module_hierarchy": [],
    }
    for h in handles:
        info = index.handles.get(h)
        if info is None:
            continue
        out["op_names"].extend(info.op_names)
        out["op_types"].extend(info.op_types)
        out["stack_traces"].extend(info.stack_traces)
        out["module_hierarchy"].extend(info.module_hierarchy)
    return out


def source_line(stack_trace: str) -> str:
    """The innermost frame of model code: `file.py:75 in forward: x = ...` (for a Hugging Face
    model, its line in transformers' modeling file; see `stages.analyze.link.source_frames`)."""
    return model_source_line(stack_trace)


def dump_stamp(dump: ETDumpData, event_name: str) -> str | None:
    """The sha256 a stamp of our run stage carries, or None (e.g. ExecuTorch's ETDumps)."""
    return read_stamp(dump, event_name)


def dump_fingerprint(dump: ETDumpData) -> str | None:
    """The lowered program's sha256 the ETDump names, if it names one."""
    return dump_stamp(dump, FINGERPRINT_EVENT)


def check_same_program(dump: ETDumpData, index: ProgramIndex, etdump: str, etrecord: str) -> None:
    """Refuse an ETDump/ETRecord pair from different programs (fingerprint, then structure)."""
    if not index.linked:
        return
    found = dump_fingerprint(dump)
    if found and found == index.lowered_fingerprint:
        return  # proven the same program: what does not link is a map finding (map_check)
    if found and index.lowered_fingerprint and found != index.lowered_fingerprint:
        raise ProgramMismatchError(
            f"{etdump} was written by lowered program {found[:12]}…, but {etrecord} describes "
            f"lowered program {index.lowered_fingerprint[:12]}…; pass the ETRecord of the run "
            "that wrote this ETDump (analyze.etrecord=...), or analyze.etrecord=null to analyze "
            "events and timings only"
        )
    counts: dict[tuple[str, int, DelegateIdentifier | None], int] = {}
    for block in dump.run_data:  # each instruction recurs every iteration: check it once
        for event in block.events:
            pe, de = event.profile_event, event.debug_event
            if pe is not None and pe.name not in STAMP_EVENTS:
                ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
                key = (pe.name, pe.instruction_id, ident)
            elif de is not None and de.instruction_id >= 0:
                ident = identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)
                key = ("debug output", de.instruction_id, ident)
            else:
                continue
            counts[key] = counts.get(key, 0) + 1
    bad = {k: n for k, n in counts.items() if link_event(index, k[0], k[1], k[2]) is None}
    unknown = [f"{name} (instruction {iid}, id {ident!r})" for name, iid, ident in bad]
    if unknown:
        examples = "; ".join(sorted(unknown)[:5])
        raise ProgramMismatchError(
            f"{sum(bad.values())} event(s) in {etdump} name instructions or delegate identifiers that "
            f"{etrecord} does not have (e.g. {examples}), and no program fingerprint in both "
            "proves them one program: they do not belong together. Pass the matching analyze.etrecord=..., or analyze.etrecord=null for "
            "timings only"
        )
