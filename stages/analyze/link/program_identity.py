"""Do the analysed files belong together? Proven by their fingerprints, or reported unproven.

Our run stage stamps the ETDump with the lowered program's sha256 (as the ETRecord records it)
and with its debug buffer's sha256, and the buffer's trailer names the program. A mismatch is
refused. ExecuTorch's files carry no such stamps: then whatever can be checked is (each logged
tensor fits the buffer; logged outputs' shapes and dtypes against the reference program's for
the same debug handles) and the result says that identity could not be proven.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.link.linking import (
    ProgramIndex,
    ProgramMismatchError,
    dump_fingerprint,
    dump_stamp,
    identifier_of,
    link_event,
    logged_outputs,
)
from stages.analyze.link.view_shapes import same_but_unit_dims
from stages.formats.etdump import DebugBuffer, ETDumpData, TensorRecord, ValueType
from stages.formats.etdump.debug_buffer import scalar_dtype, tensor_nbytes
from stages.formats.etdump.records import DEBUG_BUFFER_EVENT, DebugEvent
from stages.formats.etdump.streaming import holds_debug_events
from stages.handles.debug_handles import DebugHandle, get_debug_handle

PROVEN = "proven"
UNPROVEN = "unproven"
NO_ETRECORD = "no_etrecord"
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class AnalysedFiles:
    """The names of the analysed files, as error messages and the summary show them."""

    etdump: str
    etrecord: str
    debug_buffer: str


@dataclass(frozen=True)
class ProgramIdentity:
    """Whether the files are proven to come from one program and one run, and what was checked."""

    status: str  # proven | unproven | no_etrecord
    reasons: tuple[str, ...] = ()
    checked_outputs: int = 0
    mismatches: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The `program_identity` entry of summary.json."""
        return {
            "status": self.status,
            "reasons": list(self.reasons),
            "checked_outputs": self.checked_outputs,
            "shape_or_dtype_mismatches": len(self.mismatches),
            "mismatch_examples": list(self.mismatches[:MAX_EXAMPLES]),
        }


def _debug_tensors(dump: ETDumpData) -> Iterator[tuple[DebugEvent, list[TensorRecord]]]:
    for block in filter(holds_debug_events, dump.run_data):
        for event in block.events:
            de = event.debug_event
            value = de.debug_entry if de is not None else None
            if de is None or value is None:
                continue
            if value.val == ValueType.TENSOR and value.tensor is not None:
                yield de, [value.tensor]
            elif value.val == ValueType.TENSOR_LIST and value.tensor_list is not None:
                yield de, list(value.tensor_list)


def _output_tensors(
    dump: ETDumpData, index: ProgramIndex
) -> Iterator[tuple[DebugEvent, list[TensorRecord]]]:
    """Logged instruction outputs only (not a delegate call's logged inputs)."""
    for block in filter(holds_debug_events, dump.run_data):
        for _, de, values in logged_outputs(block.events, index):
            records: list[TensorRecord] = []
            for value in values:
                if value.val == ValueType.TENSOR and value.tensor is not None:
                    records.append(value.tensor)
                elif value.val == ValueType.TENSOR_LIST and value.tensor_list is not None:
                    records.extend(value.tensor_list)
            if records:
                yield de, records


def _check_buffer(
    dump: ETDumpData, buffer: DebugBuffer, index: ProgramIndex, files: AnalysedFiles
) -> None:
    """Refuse a debug buffer that provably belongs to another run or program, or is too short."""
    recorded = dump_stamp(dump, DEBUG_BUFFER_EVENT)
    if recorded is not None and recorded != buffer.content_sha256():
        raise ProgramMismatchError(
            f"{files.debug_buffer} is not the debug buffer {files.etdump} was written with (the "
            f"ETDump records tensor bytes with sha256 {recorded[:12]}…, the buffer holds "
            f"{buffer.content_sha256()[:12]}…); pass the debug buffer of the same run "
            "(analyze.debug_buffer=...)"
        )
    written_by = buffer.program_fingerprint
    for fingerprint, source in (
        (dump_fingerprint(dump), files.etdump),
        (index.lowered_fingerprint, files.etrecord),
    ):
        if written_by and fingerprint and written_by != fingerprint:
            raise ProgramMismatchError(
                f"{files.debug_buffer} was written by lowered program {written_by[:12]}…, but "
                f"{source} names lowered program {fingerprint[:12]}…; pass the debug buffer of "
                "the run that wrote this ETDump (analyze.debug_buffer=...)"
            )
    size = len(buffer.payload)
    ends = [
        (t.offset + n, de)
        for de, tensors in _debug_tensors(dump)
        for t in tensors
        if (n := tensor_nbytes(t)) is not None
    ]
    end, event = max(ends, key=lambda pair: pair[0], default=(0, None))
    if event is not None and end > size:
        raise ProgramMismatchError(
            f"{files.etdump} logs a tensor (instruction {event.instruction_id}) that ends at byte "
            f"{end}, but {files.debug_buffer} holds {size} bytes of tensors; pass the debug "
            "buffer written with this ETDump (analyze.debug_buffer=...)"
        )


def prove_identity(
    dump: ETDumpData,
    buffer: DebugBuffer | None,
    index: ProgramIndex,
    files: AnalysedFiles,
    has_etrecord: bool = False,
) -> ProgramIdentity:
    """Refuse files that provably do not belong together; say what could not be proven."""
    if buffer is not None:
        _check_buffer(dump, buffer, index, files)
    if not index.linked and has_etrecord:
        return ProgramIdentity(
            UNPROVEN,
            (
                f"{files.etrecord} links none of the ETDump's events (its reference program "
                "carries no debug handles, or describes another method), so the ETDump cannot "
                "be checked against it",
            ),
        )
    if not index.linked:
        return ProgramIdentity(NO_ETRECORD, ("no ETRecord: nothing to prove the ETDump against",))
    reasons = []
    if dump_fingerprint(dump) is None:
        reasons.append(
            "the ETDump carries no program fingerprint (ExecuTorch's never do), so it cannot be "
            "proven to come from the ETRecord's program"
        )
    elif index.lowered_fingerprint is None:
        reasons.append("the ETRecord records no lowered-program fingerprint to compare with")
    if buffer is not None and dump_stamp(dump, DEBUG_BUFFER_EVENT) is None:
        reasons.append(
            "the ETDump records no debug-buffer sha256, so the debug buffer cannot be proven to "
            "be the one written with it"
        )
    return ProgramIdentity(UNPROVEN if reasons else PROVEN, tuple(reasons))


def _anchors(program: ExportedProgram) -> dict[DebugHandle, tuple[int, torch.fx.Node]]:
    """Per debug handle, its last top-level op node (not getitem) and that node's graph index."""
    found: dict[DebugHandle, tuple[int, torch.fx.Node]] = {}
    for position, node in enumerate(program.graph_module.graph.nodes):
        handle = get_debug_handle(node) if node.op == "call_function" else None
        if handle is not None and node.target is not operator.getitem:
            found[handle] = (position, node)
    return found


def _shape(value: torch.Tensor) -> tuple[int, ...] | None:
    if any(isinstance(d, torch.SymInt) for d in value.shape):
        return None  # a dynamic dimension (a generation's step program): any size is its own
    try:
        return tuple(int(d) for d in value.shape)
    except (TypeError, RuntimeError):  # symbolic sizes: not checkable here
        return None


def _agrees(record: TensorRecord, reference: object) -> bool | None:
    """True/False when checkable; None when the reference has no static tensor to check."""
    if not isinstance(reference, torch.Tensor) or (shape := _shape(reference)) is None:
        return None
    dtype = scalar_dtype(record.scalar_type)
    if dtype is None or not same_but_unit_dims(tuple(record.sizes), shape):
        return False
    if dtype.is_floating_point or reference.dtype.is_floating_point:  # precision may differ
        return dtype.is_floating_point == reference.dtype.is_floating_point
    return dtype == reference.dtype


def _describe(records: list[TensorRecord], reference: object) -> str:
    refs = reference if isinstance(reference, list | tuple) else [reference]
    logged = ", ".join(f"{list(r.sizes)} {scalar_dtype(r.scalar_type)}" for r in records)
    expected = ", ".join(
        f"{list(_shape(r) or ())} {r.dtype}" if isinstance(r, torch.Tensor) else type(r).__name__
        for r in refs
    )
    return f"logged {logged}; reference {expected}"


def check_logged_outputs(
    identity: ProgramIdentity, dump: ETDumpData, index: ProgramIndex, program: ExportedProgram
) -> ProgramIdentity:
    """Shapes and dtypes of logged outputs against the reference program's (val metadata)."""
    anchors = _anchors(program)
    checked: dict[tuple[int, object], str | None] = {}
    logged = []
    last: dict[DebugHandle, int] = {}  # a handle's last instruction computes its output
    for de, records in _output_tensors(dump, index):
        ident = identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)
        link = link_event(index, de.name, de.instruction_id, ident)
        if link is None or not link.debug_handles:
            continue
        logged.append((de, records, ident, link))
        for h in link.debug_handles if ident is None else ():
            last[h] = max(last.get(h, -1), de.instruction_id)
    for de, records, ident, link in logged:
        key = (de.instruction_id, ident)
        placed = [(*anchors[h], h) for h in link.debug_handles if h in anchors]
        if key in checked or not placed:
            continue  # not placed: e.g. ops inside torch.cond branches, no top-level node
        _, node, handle = max(placed, key=lambda item: item[0])
        if ident is None and de.instruction_id < last[handle]:
            continue  # an earlier step of a split op (ExecuTorch's linear: transpose, addmm)
        reference = node.meta.get("val")
        refs = list(reference) if isinstance(reference, list | tuple) else [reference]
        if len(records) == len(refs):
            verdicts = [_agrees(r, ref) for r, ref in zip(records, refs, strict=True)]
            agrees = None if None in verdicts else all(verdicts)
        elif len(records) == 1 or len(refs) == 1:  # one output of a multi-output op, or
            # a runtime op with more outputs than the reference's (native_layer_norm's 3)
            if len(refs) == 1:
                verdicts = [_agrees(r, refs[0]) for r in records]
            else:
                verdicts = [_agrees(records[0], ref) for ref in refs]
            agrees = True if True in verdicts else (None if None in verdicts else False)
        else:
            agrees = False
        if agrees is None:
            continue
        handles = list(link.debug_handles)
        checked[key] = (
            None if agrees else f"{node.name} (handles {handles}): " + _describe(records, reference)
        )
    mismatches = tuple(m for m in checked.values() if m is not None)
    return replace(identity, checked_outputs=len(checked), mismatches=mismatches)
