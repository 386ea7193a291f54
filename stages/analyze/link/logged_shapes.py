"""Check each delegate output the runtime logged against the ops its identifier maps to.

A logged intermediate output whose shape (or float-ness) is no output of any op of its
identifier cannot be that identifier's: a `shape_mismatch` finding, and the identifier's outputs
are not compared. When the shape is that of a neighbouring identifier's ops, the likely bug is
off-by-one logging, and the finding says so and names both (docs/delegate_map_check.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from stages.analyze.link.linking import ProgramIndex, identifier_of
from stages.backends.delegate_map_findings import MapFinding
from stages.closed_sets import MapFindingKind
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import ScalarType, ValueType
from stages.formats.etdump.streaming import holds_debug_events
from stages.formats.etrecord import DelegateMapRecord
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier, get_debug_handle

FLOAT_TYPES = frozenset({ScalarType.HALF, ScalarType.FLOAT, ScalarType.DOUBLE, ScalarType.BFLOAT16})

# An output's form: its shape and whether it is a float tensor (a backend may compute floats in
# its own precision, so fp16 for an fp32 op is its own business, int for a float op is not).
Form = tuple[tuple[int, ...], bool]
# The form of an op whose shape is symbolic (a dynamic dimension, as in a generation's step
# program): any logged shape may be its own, so its identifier is never flagged.
ANY_FORM: Form = ((-1,), False)


@dataclass(frozen=True)
class _Logged:
    """One logged tensor under a delegate identifier."""

    partition_id: int
    identifier: DelegateIdentifier
    form: Form


def handle_forms(program: torch.export.ExportedProgram) -> dict[DebugHandle, set[Form]]:
    """Per debug handle, the forms of its nodes' tensor outputs (getitems share the handle)."""
    forms: dict[DebugHandle, set[Form]] = {}
    for node in program.graph_module.graph.nodes:
        handle = get_debug_handle(node)
        value = node.meta.get("val")
        if handle is None or not isinstance(value, torch.Tensor):
            continue
        shape = tuple(value.shape)
        static = all(isinstance(d, int) for d in shape)
        form = (tuple(int(d) for d in shape), value.is_floating_point()) if static else ANY_FORM
        forms.setdefault(handle, set()).add(form)
    return forms


def _logged(dump: ETDumpData, index: ProgramIndex) -> Iterator[_Logged]:
    """Every tensor a delegate logged under one of its map's identifiers, in a capture block."""
    for block in filter(holds_debug_events, dump.run_data):
        for event in block.events:
            de = event.debug_event
            if de is None or de.debug_entry is None or de.debug_entry.val != ValueType.TENSOR:
                continue
            record = index.delegate_instructions.get(de.instruction_id)
            ident = identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)
            tensor = de.debug_entry.tensor
            if record is None or ident is None or tensor is None:
                continue
            if ident in record.debug_handle_map:
                form = (tuple(tensor.sizes), tensor.scalar_type in FLOAT_TYPES)
                yield _Logged(record.partition_id, ident, form)


def _forms_of(
    record: DelegateMapRecord, ident: DelegateIdentifier, forms: dict[DebugHandle, set[Form]]
) -> set[Form]:
    return {f for h in record.debug_handle_map.get(ident, ()) for f in forms.get(h, set())}


def _neighbour(
    record: DelegateMapRecord,
    ident: DelegateIdentifier,
    form: Form,
    forms: dict[DebugHandle, set[Form]],
) -> DelegateIdentifier | None:
    """The identifier before (then after) `ident` in the map whose ops have this form."""
    order: Sequence[DelegateIdentifier] = list(record.debug_handle_map)
    at = order.index(ident)
    for other in (at - 1, at + 1):
        if 0 <= other < len(order) and form in _forms_of(record, order[other], forms):
            return order[other]
    return None


def _describe(form: Form) -> str:
    return f"{list(form[0])} {'float' if form[1] else 'non-float'}"


def _finding(
    record: DelegateMapRecord,
    logged: _Logged,
    forms: dict[DebugHandle, set[Form]],
    op_names: dict[DebugHandle, tuple[str, ...]],
) -> MapFinding:
    ident, pid = logged.identifier, logged.partition_id
    handles = record.debug_handle_map[ident]
    ops = tuple(n for h in handles for n in op_names.get(h, ()))
    expected = sorted(_forms_of(record, ident, forms))
    near = _neighbour(record, ident, logged.form, forms)
    near_handles = record.debug_handle_map.get(near, ()) if near is not None else ()
    near_ops = [n for h in near_handles for n in op_names.get(h, ())]
    clue = (
        f"; it is the output form of identifier {near!r} ({', '.join(near_ops)}): logged under "
        f"the wrong identifier? (identifiers {ident!r} and {near!r})"
        if near is not None
        else ""
    )
    return MapFinding(
        MapFindingKind.shape_mismatch,
        pid,
        record.backend_name,
        (ident,) if near is None else (ident, near),
        tuple(handles),
        ops,
        f"partition {pid} ({record.backend_name}) logged an output of shape "
        f"{_describe(logged.form)} under identifier {ident!r}, which no op it maps to "
        f"({', '.join(ops)}: {', '.join(_describe(f) for f in expected)}) can produce{clue}; "
        f"the outputs logged under {ident!r} are not compared",
        stage="analyze",
        not_comparable=(ident,),
        numbers={
            "logged_shape": list(logged.form[0]),
            "expected_shapes": [list(f[0]) for f in expected],
            **({"likely_identifier": near} if near is not None else {}),
        },
    )


def check_logged_shapes(
    dump: ETDumpData, index: ProgramIndex, program: Callable[[], torch.export.ExportedProgram]
) -> list[MapFinding]:
    """One `shape_mismatch` per (partition, identifier) that logged an impossible output
    (`program` loads the reference program, only when a delegate logged something)."""
    logged_values = list(_logged(dump, index))
    if not logged_values:
        return []
    forms = handle_forms(program())
    op_names = {h: info.op_names for h, info in index.handles.items()}
    by_partition = {m.partition_id: m for m in index.maps}
    seen: set[tuple[int, DelegateIdentifier]] = set()
    findings = []
    for logged in logged_values:
        key = (logged.partition_id, logged.identifier)
        record = by_partition[logged.partition_id]
        expected = _forms_of(record, logged.identifier, forms)
        if key in seen or not expected or logged.form in expected or ANY_FORM in expected:
            continue
        seen.add(key)
        findings.append(_finding(record, logged, forms, op_names))
    return findings
