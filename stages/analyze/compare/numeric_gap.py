"""Numeric gap: runtime intermediate outputs against the exported ATen program, by debug handle.

Runtime outputs (operators and delegate identifiers) are grouped by overlapping debug-handle
sets; a group compares its last op's output (accumulated gap), and also re-runs its reference
ops on the runtime's own inputs to the group (local gap): the op that introduces error shows a
local gap, ops that only carry it do not.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.comparators import Comparator, identical_value
from stages.analyze.compare.exact_compare import (
    IndexOutput,
    count_index_mismatches,
    count_mismatches,
    index_output,
)
from stages.analyze.compare.expected_error import (
    ACCUMULATED_DB,
    PrecisionEmulation,
    bit_identical,
    constant_placeholders,
    error_budget,
    variation_snr,
)
from stages.analyze.compare.reference_stream import (
    Liveness,
    ReferenceStepper,
    graph_liveness,
    max_abs_ranges_streamed,
)
from stages.analyze.link.control_flow import (
    CondRecord,
    CondSite,
    cond_sites,
    downstream,
    node_order,
    predicate_source,
    run_branch,
    runtime_branch,
)
from stages.analyze.link.linking import (
    Link,
    ProgramIndex,
    identifier_of,
    link_event,
    logged_outputs,
)
from stages.analyze.link.map_check import MapCheck
from stages.formats.debug_handles import DebugHandle, DelegateIdentifier, get_debug_handle
from stages.formats.etdump import ETDumpData, ValueRecord, ValueType, tensor_from_buffer

Value = Any  # a tensor, a list of tensors, or None for values we do not compare


@dataclass(frozen=True)
class RuntimeOutput:
    """One logged intermediate output of one execution."""

    order: int
    sample: int
    link: Link
    value: Value


@dataclass
class GapGroup:
    """Runtime outputs whose handle sets overlap, and what they are compared against."""

    handles: tuple[DebugHandle, ...]
    anchor: torch.fx.Node | None
    nodes: list[torch.fx.Node]
    identifiers: list[DelegateIdentifier] = field(default_factory=list)
    backend: str = ""
    is_delegated: bool = False
    # Ops feeding the group whose runtime values were not logged (or not usable): its local gap
    # then re-runs on their reference values, so a divergence may have started in them.
    unobserved_inputs: list[str] = field(default_factory=list)


@dataclass
class GapRow:
    """One compared output of one group (multi-output ops give one row per output)."""

    group: int
    topo_index: int
    output_index: int
    handles: tuple[DebugHandle, ...]
    identifiers: list[DelegateIdentifier]
    backend: str
    is_delegated: bool
    status: str
    runtime_shape: tuple[int, ...] | None = None
    reference_shape: tuple[int, ...] | None = None
    runtime_dtype: str = ""
    accumulated: dict[str, float] = field(default_factory=dict)
    local: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    comparison: str = "float"  # "float" (comparators), "exact" (int/bool), "index" (tie rule)
    follows_flip: str = ""  # the cond whose branch flipped upstream of this output, if any
    unobserved_inputs: tuple[str, ...] = ()  # see GapGroup.unobserved_inputs
    # Observed vs expected local error (stages/analyze/compare/expected_error.py), float rows.
    budget: dict[str, float] = field(default_factory=dict)


def _decode(value: ValueRecord | None, buffer: bytes | memoryview, where: str) -> Value:
    if value is None:
        return None
    if value.val == ValueType.TENSOR and value.tensor is not None:
        return tensor_from_buffer(buffer, value.tensor, where)
    if value.val == ValueType.TENSOR_LIST and value.tensor_list is not None:
        return [tensor_from_buffer(buffer, t, where) for t in value.tensor_list]
    for scalar in (value.bool_value, value.int_value, value.double_value, value.float_value):
        if scalar is not None:  # Int/Bool/Double values (`.item()`): compared as 0-d tensors
            return _scalar_tensor(scalar)
    return None


def _scalar_tensor(value: Any) -> Any:
    """A Python bool/int/float as a 0-d tensor (float64 for floats); anything else unchanged."""
    if isinstance(value, bool | int | float):
        return torch.tensor(value, dtype=torch.float64 if isinstance(value, float) else None)
    return value


def runtime_outputs(
    dump: ETDumpData,
    buffer: bytes | memoryview,
    index: ProgramIndex,
    where: str = "debug buffer",
    map_check: MapCheck | None = None,
) -> list[RuntimeOutput]:
    """Intermediate outputs of every capture block, in execution order, linked to handles
    (with a `map_check`, as the delegate map findings allow: stages.analyze.link.map_check)."""
    outputs: list[RuntimeOutput] = []
    capture_blocks = [
        b
        for b in dump.run_data
        if any(e.debug_event is not None and e.debug_event.instruction_id >= 0 for e in b.events)
    ]
    for position, block in enumerate(capture_blocks):
        sample = block.bundled_input_index if block.bundled_input_index >= 0 else position
        for order, de, values in logged_outputs(block.events, index):
            if map_check is not None:
                link = map_check.output_link(index, de)
            else:
                ident = identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)
                link = link_event(index, de.name, de.instruction_id, ident)
            if link is None or not link.debug_handles:
                continue
            decoded = [_decode(v, buffer, where) for v in values]
            value = decoded[0] if len(decoded) == 1 else decoded
            outputs.append(RuntimeOutput(order, sample, link, value))
    return outputs


def _is_getitem(node: torch.fx.Node) -> bool:
    return node.target is operator.getitem


def build_groups(
    outputs: list[RuntimeOutput],
    graph: torch.fx.Graph,
    order: Sequence[torch.fx.Node] | None = None,
) -> tuple[list[GapGroup], dict[torch.fx.Node, int]]:
    """Union overlapping handle sets; groups in topological order of their anchor node (`order`:
    the graph's nodes with cond branch ops placed before their cond)."""
    parent: dict[DebugHandle, DebugHandle] = {}

    def find(h: DebugHandle) -> DebugHandle:
        while parent.setdefault(h, h) != h:
            parent[h] = parent[parent[h]]
            h = parent[h]
        return h

    for out in outputs:
        first = find(out.link.debug_handles[0])
        for h in out.link.debug_handles[1:]:
            parent[find(h)] = first
    members: dict[DebugHandle, set[DebugHandle]] = {}
    for h in list(parent):
        members.setdefault(find(h), set()).add(h)
    nodes_in_order = list(graph.nodes) if order is None else list(order)
    topo = {n: i for i, n in enumerate(nodes_in_order)}
    by_handle: dict[DebugHandle, list[torch.fx.Node]] = {}
    for node in nodes_in_order:
        handle = get_debug_handle(node) if node.op == "call_function" else None
        if handle is not None:
            by_handle.setdefault(handle, []).append(node)
    groups = []
    for handles in members.values():
        nodes = sorted((n for h in handles for n in by_handle.get(h, [])), key=topo.__getitem__)
        ops = [n for n in nodes if not _is_getitem(n)]
        group = GapGroup(tuple(sorted(handles)), ops[-1] if ops else None, nodes)
        for out in outputs:
            if out.link.debug_handles[0] in handles:
                ident = out.link.delegate_debug_identifier
                if ident is not None and ident not in group.identifiers:
                    group.identifiers.append(ident)
                group.backend = group.backend or out.link.delegate_backend_name
                group.is_delegated = group.is_delegated or out.link.is_delegated_op
        groups.append(group)
    groups.sort(key=lambda g: (topo[g.anchor] if g.anchor is not None else math.inf, g.handles))
    return groups, topo


def _pairs(runtime: Value, reference: Any) -> tuple[list[tuple[int, Any, Any]], str]:
    """(output index, runtime tensor, reference tensor) to compare, and a status."""
    rts = list(runtime) if isinstance(runtime, list | tuple) else [runtime]
    refs = [
        _scalar_tensor(r)
        for r in (list(reference) if isinstance(reference, list | tuple) else [reference])
    ]
    if len(rts) == len(refs):
        pairs = list(zip(range(len(rts)), rts, refs, strict=True))
    elif len(refs) == 1 and isinstance(refs[0], torch.Tensor):  # e.g. native_layer_norm's 3
        # the runtime op's output of the reference's shape and kind: native_dropout's value,
        # never its bool mask of the same shape
        shape, floating = tuple(refs[0].shape), refs[0].is_floating_point()
        same = [t for t in rts if isinstance(t, torch.Tensor) and tuple(t.shape) == shape]
        kind = [t for t in same if t.is_floating_point() == floating]
        pairs = [(0, (kind or same or rts)[-1], refs[0])]
    elif len(rts) == 1 and isinstance(rts[0], torch.Tensor):
        match = [
            i
            for i, r in enumerate(refs)
            if isinstance(r, torch.Tensor) and tuple(r.shape) == tuple(rts[0].shape)
        ]
        if not match:
            return [(0, rts[0], None)], "shape_mismatch"
        pairs = [(match[-1], rts[0], refs[match[-1]])]
    else:
        return [], "output_count_mismatch"
    return [
        (i, a, b)
        for i, a, b in pairs
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    ], "ok"


def _status(rt: torch.Tensor, ref: torch.Tensor | None) -> str:
    if ref is None or tuple(rt.shape) != tuple(ref.shape):
        return "shape_mismatch"
    if rt.is_floating_point() != ref.is_floating_point() or (
        not rt.is_floating_point() and rt.dtype != ref.dtype
    ):
        return "dtype_mismatch"
    return "ok"


def _like(value: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """A logged value (contiguous, as the debug buffer stores it) with the reference's dtype and
    strides: ATen's kernels pick their path by layout (a permuted matmul input sums in another
    order), so the local re-run must see the layout the runtime's op saw."""
    value = value.to(reference.dtype)
    if value.stride() == reference.stride():
        return value
    try:
        laid_out = torch.empty_strided(reference.shape, reference.stride(), dtype=reference.dtype)
        return laid_out.copy_(value)
    except RuntimeError:  # an expanded view (stride 0) cannot be written: keep it contiguous
        return value


def _stand_in(value: Value, ref: Any, lists: bool = True) -> Any:
    """`value` laid out like the reference value `ref` when shapes make the match certain (with
    `lists`, also a list of values for a multi-output op's tuple or list), else None."""
    if isinstance(ref, torch.Tensor) and isinstance(value, torch.Tensor):
        return _like(value, ref) if tuple(ref.shape) == tuple(value.shape) else None
    if (
        lists
        and isinstance(ref, tuple | list)
        and isinstance(value, list)
        and len(ref) == len(value)
    ):
        # split/chunk/unbind give lists, multi-output ops tuples: keep the reference's type
        return type(ref)(
            _like(v, r) if isinstance(v, torch.Tensor) and isinstance(r, torch.Tensor) else r
            for v, r in zip(value, ref, strict=True)
        )
    return None


def _last_stand_in(candidates: Sequence[Value], ref: Any, lists: bool = True) -> Any:
    """The last of `candidates` (runtime values logged for one node, in order) that can stand in
    for `ref`; None when none can."""
    for value in reversed(candidates):
        found = _stand_in(value, ref, lists)
        if found is not None:
            return found
    return None


def group_outputs(group: GapGroup) -> list[torch.fx.Node]:
    """The group's nodes whose values leave it (used by a node outside, or a graph output), in
    graph order: what a delegate call with several outputs returns."""
    members = set(group.nodes)
    return [
        n
        for n in group.nodes
        if isinstance(n.meta.get("val"), torch.Tensor)
        and any(user not in members for user in n.users)
    ]


def _multi_output_nodes(group: GapGroup, runtime: Value, reference: Any) -> list[torch.fx.Node]:
    """For a call logging k > 1 outputs whose anchor is not a k-output op (a delegate call
    returning several of its ops' values), the k group nodes they are; else none."""
    if not isinstance(runtime, list) or len(runtime) < 2:
        return []
    if isinstance(reference, list | tuple) and len(reference) == len(runtime):
        return []  # a multi-output op (native_dropout's value and mask): output i is output i
    leaving = group_outputs(group)
    return leaving if len(leaving) == len(runtime) else []


def _partition_candidates(
    sample_outputs: list[RuntimeOutput], groups: list[GapGroup], group_of: dict[DebugHandle, int]
) -> dict[torch.fx.Node, list[Value]]:
    """A delegate call's logged outputs (a partition compared as a whole) as candidates for the
    partition's output nodes, in the partition's output order (nodes read from outside)."""
    found: dict[torch.fx.Node, list[Value]] = {}
    for out in sample_outputs:
        link = out.link
        if link.partition_id is None or link.delegate_debug_identifier is not None:
            continue
        values = out.value if isinstance(out.value, list) else [out.value]
        group = groups[group_of[link.debug_handles[0]]]
        members = set(group.nodes)
        outputs = [
            n
            for n in group.nodes
            if (_is_getitem(n) or not isinstance(n.meta.get("val"), list | tuple))
            and any(user not in members for user in n.users)
        ]
        if len(outputs) != len(values):
            continue
        for node, value in zip(outputs, values, strict=True):
            found.setdefault(node, []).append(value)
    return found


def _note_unobserved(group: GapGroup, subst: Collection[torch.fx.Node]) -> None:
    """Record the ops upstream of the group whose runtime values were not given: its direct op
    inputs that were not logged, and their own unlogged producers (see GapGroup)."""
    members = set(group.nodes)

    def observed(node: torch.fx.Node) -> bool:
        source = node.args[0] if _is_getitem(node) else node
        return node.op != "call_function" or node in subst or source in subst

    stack = [a for n in group.nodes for a in n.all_input_nodes if a not in members]
    seen: set[torch.fx.Node] = set()
    while stack:
        node = stack.pop()
        if node in seen or observed(node):
            continue
        seen.add(node)
        if not _is_getitem(node) and node.name not in group.unobserved_inputs:
            group.unobserved_inputs.append(node.name)
        stack.extend(node.all_input_nodes)
    if seen:
        graph_order = {n.name: i for i, n in enumerate(next(iter(seen)).graph.nodes)}
        group.unobserved_inputs.sort(key=lambda name: graph_order.get(name, 0))


def _same_value(runtime: Any, reference: Any) -> bool:
    """The very object, or tensors of one dtype and shape with the same bits (NaN: never)."""
    if runtime is reference:
        return True
    tensors = isinstance(runtime, torch.Tensor) and isinstance(reference, torch.Tensor)
    return tensors and bit_identical([runtime], [reference])


def _reference_inputs(
    group: GapGroup,
    members: set[torch.fx.Node],
    outside: Callable[[torch.fx.Node], Any],
    env: dict[torch.fx.Node, Any],
) -> bool:
    """Every value the group reads from outside is the reference's, and the reference still
    holds every member's value."""
    if any(node not in env for node in group.nodes):
        return False
    inputs = {a for n in group.nodes for a in n.all_input_nodes if a not in members}
    return all(node in env and _same_value(outside(node), env[node]) for node in inputs)


def _rerun(
    group: GapGroup,
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
    fixed: dict[torch.fx.Node, Any] | None = None,
    outputs: Sequence[torch.fx.Node] = (),
    emulation: PrecisionEmulation | None = None,
) -> tuple[Any, Any]:
    """The group's reference ops on the runtime's inputs: the anchor's value, and the value of
    the anchor's first argument (what an index op ranked). `fixed` values stand for member
    nodes (a cond's outputs are the runtime branch's outputs: its ops are compared one by one).
    With `emulation`, inputs, constants and op outputs are rounded to its precision."""
    members = set(group.nodes)
    local: dict[torch.fx.Node, Any] = {}
    weights = emulation.weights(members) if emulation is not None else set()

    def outside(n: torch.fx.Node) -> Any:
        if n in subst:
            return subst[n]
        source = n.args[0] if _is_getitem(n) else None
        if isinstance(source, torch.fx.Node) and source in subst and source not in members:
            return subst[source][n.args[1]]
        return env[n]

    def lookup(n: torch.fx.Node) -> Any:
        if n in local:
            return local[n]
        if n not in members:
            value = outside(n)
            return emulation.stored(n, value, weights) if emulation is not None else value
        return env[n]

    stood_in = fixed is not None and any(node in fixed for node in group.nodes)
    if emulation is None and not stood_in and _reference_inputs(group, members, outside, env):
        # The runtime fed the group exactly the reference's inputs: its ops would give the
        # reference's values again (and a random op its own draw), so they are not re-run.
        local = {node: env[node] for node in group.nodes}
    with torch.no_grad():
        for node in group.nodes:
            if node in local:
                continue
            if fixed is not None and node in fixed:
                local[node] = fixed[node]
                continue
            args = torch.fx.node.map_arg(node.args, lookup)
            kwargs = torch.fx.node.map_arg(node.kwargs, lookup)
            local[node] = node.target(*args, **kwargs)  # type: ignore[operator]
            if emulation is not None and not _is_getitem(node):
                local[node] = emulation.rounded(node, local[node])
    if group.anchor is None:
        return None, None
    first = group.anchor.args[0] if group.anchor.args else None
    ranked = lookup(first) if isinstance(first, torch.fx.Node) else None
    if outputs:
        return [local[n] for n in outputs], ranked
    return local[group.anchor], ranked


def _compare(
    comparators: Sequence[Comparator], runtime: list[torch.Tensor], reference: list[torch.Tensor]
) -> dict[str, float]:
    if bit_identical(runtime, reference):  # every exact fp32 output: no arithmetic needed
        known = {c.name: identical_value(c) for c in comparators}
        if all(v is not None for v in known.values()):
            return {name: float(v) for name, v in known.items() if v is not None}
    rt = torch.cat([t.detach().double().flatten() for t in runtime])
    ref = torch.cat([t.detach().double().flatten() for t in reference])
    return {c.name: float(c.compare(rt, ref)) for c in comparators}


@dataclass(frozen=True)
class _Rule:
    """How one group output is compared: float comparators, exact counts, or the index rule."""

    comparators: Sequence[Comparator]
    index: IndexOutput | None
    tolerance: float

    def kind(self, runtime: torch.Tensor) -> str:
        if runtime.is_floating_point() or runtime.is_complex():
            return "float"
        return "index" if self.index is not None else "exact"

    def compare(
        self,
        kind: str,
        runtime: list[torch.Tensor],
        reference: list[torch.Tensor],
        ranked: list[Any],
    ) -> dict[str, float]:
        if kind == "float":
            return _compare(self.comparators, runtime, reference)
        spec = self.index
        if (
            kind == "index"
            and spec is not None
            and len(ranked) == len(runtime)
            and all(isinstance(x, torch.Tensor) for x in ranked)
        ):
            return count_index_mismatches(runtime, reference, ranked, spec, self.tolerance)
        return count_mismatches(runtime, reference)


def _rule_for(
    group: GapGroup, output_index: int, comparators: Sequence[Comparator], tolerance: float
) -> _Rule:
    spec = index_output(group.anchor) if group.anchor is not None else None
    if spec is not None and spec.output_index != output_index:
        spec = None
    return _Rule(comparators, spec, tolerance)


@dataclass
class _Slot:
    """What one group output collects over the samples before it is compared."""

    status: str = "ok"
    rt: list[torch.Tensor] = field(default_factory=list)
    ref: list[torch.Tensor] = field(default_factory=list)
    loc: list[torch.Tensor] = field(default_factory=list)
    ranked: list[Any] = field(default_factory=list)  # what an index op ranked (reference)
    ranked_loc: list[Any] = field(default_factory=list)  # ... and in the local re-run
    exp: list[torch.Tensor] = field(default_factory=list)  # local re-run at the emulated precision
    shape: tuple[Any, Any] | None = None
    dtype: str = ""


def _collect_group(
    slots: dict[tuple[int, int], _Slot],
    gi: int,
    group: GapGroup,
    runtime: Value,
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
    fixed: dict[torch.fx.Node, Any] | None = None,
    emulation: PrecisionEmulation | None = None,
) -> None:
    """One sample's runtime output of a group, paired with its reference and local values (and
    the local values at the emulated precision, when `emulation` is active)."""
    anchor = group.anchor
    if anchor is None:  # no reference node (ops inside a cond branch): rows say no_reference
        return
    reference = env.get(anchor)
    several = _multi_output_nodes(group, runtime, reference)
    if several:  # each output of the call against the node it is
        reference = [env.get(n) for n in several]
    pairs, status = _pairs(runtime, reference)
    first = anchor.args[0] if anchor.args else None
    ranked = env.get(first) if isinstance(first, torch.fx.Node) else None
    ranked_loc = None
    try:
        local_ref, ranked_loc = _rerun(group, env, subst, fixed, several)
        local_pairs = {i: b for i, _, b in _pairs(runtime, local_ref)[0]}
    except Exception as exc:  # a reference op refusing runtime inputs is a finding
        local_pairs, status = {}, f"local_rerun_failed: {type(exc).__name__}"
    expected_pairs = _expected_pairs(group, env, subst, fixed, emulation, runtime, several)
    if not pairs:
        slots.setdefault((gi, 0), _Slot(status=status))
    for oi, rt, ref in pairs:
        slot = slots.setdefault((gi, oi), _Slot())
        row_status = status if status != "ok" else _status(rt, ref)
        slot.shape = (tuple(rt.shape), tuple(ref.shape) if ref is not None else None)
        slot.dtype = str(rt.dtype).removeprefix("torch.")
        if row_status != "ok":
            slot.status = row_status
            continue
        slot.rt.append(rt)
        slot.ref.append(ref)
        slot.ranked.append(ranked)
        local = local_pairs.get(oi)
        if isinstance(local, torch.Tensor) and tuple(local.shape) == tuple(rt.shape):
            slot.loc.append(local)
            slot.ranked_loc.append(ranked_loc)
        emulated = expected_pairs.get(oi)
        if isinstance(emulated, torch.Tensor) and tuple(emulated.shape) == tuple(rt.shape):
            slot.exp.append(emulated)


def _expected_pairs(
    group: GapGroup,
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
    fixed: dict[torch.fx.Node, Any] | None,
    emulation: PrecisionEmulation | None,
    runtime: Value,
    outputs: Sequence[torch.fx.Node] = (),
) -> dict[int, Any]:
    """Per output index, the group's local re-run at the emulated precision (none at fp32)."""
    if emulation is None or not emulation.active or not group.is_delegated:
        return {}
    try:
        emulated, _ = _rerun(group, env, subst, fixed, outputs, emulation)
    except Exception:  # the fp32 re-run reports the failure; the budget falls back to the floor
        return {}
    return {i: b for i, _, b in _pairs(runtime, emulated)[0]}


def _build_rows(
    groups: list[GapGroup],
    topo: dict[torch.fx.Node, int],
    slots: dict[tuple[int, int], _Slot],
    comparators: Sequence[Comparator],
    tie_tolerance: float,
    emulation: PrecisionEmulation | None = None,
    floor_units: float = 0.0,
) -> list[GapRow]:
    rows: list[GapRow] = []
    for (gi, oi), slot in sorted(slots.items()):
        group = groups[gi]
        shapes = slot.shape or (None, None)
        row = GapRow(
            group=gi,
            topo_index=topo.get(group.anchor, -1) if group.anchor is not None else -1,
            output_index=oi,
            handles=group.handles,
            identifiers=group.identifiers,
            backend=group.backend,
            is_delegated=group.is_delegated,
            status=slot.status,
            runtime_shape=shapes[0],
            reference_shape=shapes[1],
            runtime_dtype=slot.dtype,
            samples=len(slot.rt),
            unobserved_inputs=tuple(group.unobserved_inputs),
        )
        if row.status == "ok" and slot.rt:
            rule = _rule_for(group, oi, comparators, tie_tolerance)
            row.comparison = rule.kind(slot.rt[0])
            row.accumulated = rule.compare(row.comparison, slot.rt, slot.ref, slot.ranked)
            if row.comparison == "float":
                row.budget[ACCUMULATED_DB] = variation_snr(slot.rt, slot.ref)
            if len(slot.loc) == len(slot.rt):
                row.local = rule.compare(row.comparison, slot.rt, slot.loc, slot.ranked_loc)
                if row.comparison == "float" and emulation is not None:
                    exp = slot.exp if len(slot.exp) == len(slot.rt) else None
                    row.budget.update(
                        error_budget(slot.rt, slot.loc, exp, emulation.precision, floor_units)
                    )
        rows.append(row)
    return rows


def compute_numeric_gap(
    outputs: list[RuntimeOutput],
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    comparators: Sequence[Comparator],
    tie_tolerance: float = 0.0,
) -> tuple[list[GapGroup], list[GapRow]]:
    """Groups in topological order and one row per compared output (see `numeric_gap_and_flow`)."""
    groups, rows, _ = numeric_gap_and_flow(outputs, program, samples, comparators, tie_tolerance)
    return groups, rows


def _cond_record(site: CondSite) -> CondRecord:
    op, compared = predicate_source(site)
    return CondRecord(
        site.node.name, get_debug_handle(site.node), op, compared.name if compared else ""
    )


def _mark_flips(
    rows: list[GapRow], groups: list[GapGroup], sites: list[CondSite], records: list[CondRecord]
) -> None:
    """Rows of ops downstream of a cond whose branch flipped name that cond (not blamed)."""
    for site, record in zip(sites, records, strict=True):
        if not record.flipped_samples:
            continue
        after = downstream(site.node)
        for row in rows:
            anchor = groups[row.group].anchor
            if anchor in after and not row.follows_flip:
                row.follows_flip = site.node.name


def _group_values(
    groups: list[GapGroup], group_of: dict[DebugHandle, int], sample_outputs: list[RuntimeOutput]
) -> dict[int, Value]:
    """Per group with a reference node, the runtime value it compares: its anchor's output."""
    by_group: dict[int, list[RuntimeOutput]] = {}
    for out in sample_outputs:
        by_group.setdefault(group_of[out.link.debug_handles[0]], []).append(out)
    values: dict[int, Value] = {}
    for gi, mine in by_group.items():
        anchor = groups[gi].anchor
        if anchor is None:
            continue
        anchor_handle = get_debug_handle(anchor)
        chosen = [o for o in mine if anchor_handle in o.link.debug_handles] or mine
        values[gi] = chosen[-1].value
    return values


@dataclass
class WalkStats:
    """The most op outputs of the reference the comparison held at once (over all samples) and
    their bytes: what bounds its memory."""

    peak_values: int = 0
    peak_bytes: int = 0


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_tensor_bytes(v) for v in value)
    return 0


class _SampleWalk:
    """One sample's live state while the program is walked: its reference values, the runtime
    values standing in for nodes (`subst`), and the value each group compares."""

    def __init__(
        self,
        program: ExportedProgram,
        inputs: Sequence[torch.Tensor],
        outputs: list[RuntimeOutput],
        anchor_of: Callable[[tuple[DebugHandle, ...]], torch.fx.Node | None],
        groups: list[GapGroup],
        group_of: dict[DebugHandle, int],
    ) -> None:
        self.stepper = ReferenceStepper(program, inputs)
        self.logged = {h for out in outputs for h in out.link.debug_handles}
        self.by_anchor: dict[torch.fx.Node, list[Value]] = {}
        for out in outputs:
            anchor = anchor_of(out.link.debug_handles)
            if anchor is not None:
                self.by_anchor.setdefault(anchor, []).append(out.value)
        self.by_partition = _partition_candidates(outputs, groups, group_of)
        self.values = _group_values(groups, group_of, outputs)
        self.subst: dict[torch.fx.Node, Any] = {}
        # Where a partition output also stands in as an anchor, the branch step of a cond saw the
        # partition's value (substitution order: anchors, partitions, cond branches, anchors).
        self.at_branch: dict[torch.fx.Node, Any] = {}
        self.substituted: set[torch.fx.Node] = set()  # every node ever given a stand-in
        self.fixed: dict[torch.fx.Node, Any] = {}

    @property
    def env(self) -> dict[torch.fx.Node, Any]:
        return self.stepper.env

    def evaluate(self, node: torch.fx.Node) -> None:
        """A top-level node's reference value, and the runtime value standing in for it."""
        ref = self.stepper.step(node)
        anchored = _last_stand_in(self.by_anchor.get(node, ()), ref)
        partition = _last_stand_in(self.by_partition.get(node, ()), ref, lists=False)
        if anchored is not None:
            self.subst[node] = anchored
            if partition is not None:
                self.at_branch[node] = partition
        elif partition is not None:
            self.subst[node] = partition
        if node in self.subst:
            self.substituted.add(node)

    def _seen_at_branch(self, node: torch.fx.Node | None) -> Any:
        if node is None:
            return None
        return self.at_branch.get(node, self.subst.get(node))

    def branch(self, site: CondSite, record: CondRecord) -> None:
        """The branch each side took at `site` (into `record`); the reference values of the
        runtime's branch ops, their stand-ins, and the cond's outputs its local re-run uses."""
        env = self.env
        pred_value = env.get(site.predicate) if site.predicate is not None else None
        reference = bool(pred_value) if isinstance(pred_value, torch.Tensor) else None
        taken = runtime_branch(site, self.logged, self._seen_at_branch(site.predicate))
        _, compared = predicate_source(site)
        shown = compared if compared is not None else site.predicate
        record.reference_branch.append(reference)
        record.runtime_branch.append(taken)
        record.reference_value.append(env.get(shown) if shown is not None else None)
        record.runtime_value.append(self._seen_at_branch(shown))
        if taken is None:
            return
        operands = [env.get(o) if isinstance(o, torch.fx.Node) else o for o in site.operands]
        values = run_branch(site, taken, operands)
        env.update(values)
        for ph, operand in zip(site.placeholders(taken), site.operands, strict=False):
            if isinstance(operand, torch.fx.Node) and operand in self.subst:
                self.subst[ph] = self._seen_at_branch(operand)
                self.substituted.add(ph)
        for node, ref in values.items():
            if node.op == "call_function":
                anchored = _last_stand_in(self.by_anchor.get(node, ()), ref)
                if anchored is not None:
                    self.subst[node] = anchored
                    self.substituted.add(node)
        outs = site.branch_outputs(taken)
        if all(isinstance(o, torch.fx.Node) and o in self.subst for o in outs):
            self.fixed[site.node] = tuple(self.subst[o] for o in outs)

    def release(self, node: torch.fx.Node) -> None:
        for held in (self.env, self.subst, self.at_branch, self.fixed):
            held.pop(node, None)


def _liveness(
    order: Sequence[torch.fx.Node],
    starts: dict[int, list[CondSite]],
    ready: dict[int, list[int]],
    groups: list[GapGroup],
) -> Liveness:
    """The last step reading each node: the graph's own reads, each cond's branch step (its
    predicate, operands and both branches' nodes), and each group's comparison (its members,
    the values it re-runs on, and the getitem sources a stand-in may be indexed from)."""
    live = graph_liveness(order)
    for step, started in starts.items():
        for site in started:
            _, compared = predicate_source(site)
            live.read([site.predicate, compared, *site.operands], step)
            for branch in site.branches:
                live.read(branch.graph.nodes, step)
    for step, ready_groups in ready.items():
        for gi in ready_groups:
            members = set(groups[gi].nodes)
            live.read(members, step)
            for node in members:
                for arg in node.all_input_nodes:
                    live.read([arg], step)
                    if _is_getitem(arg):
                        live.read(arg.all_input_nodes, step)
    return live


@dataclass(frozen=True)
class _WalkPlan:
    """At which step of the walk each cond takes its branch, each group is compared and each
    node's reference value is released (none when values are kept)."""

    starts: dict[int, list[CondSite]]
    ready: dict[int, list[int]]
    dying: dict[int, list[torch.fx.Node]]


def _plan(
    order: Sequence[torch.fx.Node],
    topo: dict[torch.fx.Node, int],
    sites: list[CondSite],
    groups: list[GapGroup],
    release_values: bool,
) -> _WalkPlan:
    starts: dict[int, list[CondSite]] = {}
    for site in sites:  # branch ops come just before their cond in `order`
        nodes = [*site.branch_nodes(True), *site.branch_nodes(False), site.node]
        starts.setdefault(min(topo[n] for n in nodes), []).append(site)
    ready: dict[int, list[int]] = {}
    for gi, group in enumerate(groups):
        if group.anchor is not None:
            ready.setdefault(max(topo[n] for n in group.nodes), []).append(gi)
    dying = _liveness(order, starts, ready, groups).dying() if release_values else {}
    return _WalkPlan(starts, ready, dying)


def _anchor_finder(
    groups: list[GapGroup], group_of: dict[DebugHandle, int]
) -> Callable[[tuple[DebugHandle, ...]], torch.fx.Node | None]:
    """The node a logged output's handles stand for: its group's last op among them."""
    cache: dict[tuple[DebugHandle, ...], torch.fx.Node | None] = {}

    def anchor_of(handles: tuple[DebugHandle, ...]) -> torch.fx.Node | None:
        if handles not in cache:
            wanted = set(handles)
            nodes = [
                n
                for n in groups[group_of[handles[0]]].nodes
                if not _is_getitem(n) and get_debug_handle(n) in wanted
            ]
            cache[handles] = nodes[-1] if nodes else None
        return cache[handles]

    return anchor_of


def _group_slots(
    gi: int,
    group: GapGroup,
    walks: list[_SampleWalk],
    noted: set[int],
    emulation: PrecisionEmulation | None,
) -> dict[tuple[int, int], _Slot]:
    """One group's runtime outputs over the samples, paired with their reference values."""
    slots: dict[tuple[int, int], _Slot] = {}
    for walk in walks:
        if gi not in walk.values:
            continue
        if gi not in noted:  # once per group: the same ops are logged in every sample
            noted.add(gi)
            _note_unobserved(group, walk.substituted)
        env, subst = walk.env, walk.subst
        _collect_group(slots, gi, group, walk.values[gi], env, subst, walk.fixed, emulation)
    return slots


def numeric_gap_and_flow(
    outputs: list[RuntimeOutput],
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    comparators: Sequence[Comparator],
    tie_tolerance: float = 0.0,
    precision: str | None = None,
    floor_units: float = 0.0,
    stats: WalkStats | None = None,
    release_values: bool = True,
    calibration: Sequence[Sequence[torch.Tensor]] | None = None,
) -> tuple[list[GapGroup], list[GapRow], list[CondRecord]]:
    """Groups in topological order, one row per compared output, and one record per cond.

    Float outputs go through the comparators; integer and bool outputs are counted exactly, index
    outputs with the tie rule at `tie_tolerance` (stages/analyze/compare/exact_compare.py). Ops inside a
    torch.cond branch are compared against the same branch of the reference on its operands.
    With `precision`, float rows get an error budget: observed local error against what that
    precision alone costs there (stages/analyze/compare/expected_error.py).

    The program is walked once, every sample in step, in topological order: a group is compared
    as soon as its last node is evaluated, and each reference value is released after its last
    reader (`release_values=False` keeps them all, to check that releasing changes nothing);
    `stats` receives how many values were held at once; int8 scales are calibrated on
    `calibration` (default: `samples`), the representative inputs the lower stage used."""
    graph = program.graph_module.graph
    sites = cond_sites(program.graph_module)
    records = [_cond_record(s) for s in sites]
    record_of = {site.node: record for site, record in zip(sites, records, strict=True)}
    order = node_order(graph, sites)
    groups, topo = build_groups(outputs, graph, order)
    group_of: dict[DebugHandle, int] = {h: i for i, g in enumerate(groups) for h in g.handles}
    by_sample: dict[int, list[RuntimeOutput]] = {}
    for out in outputs:
        by_sample.setdefault(out.sample, []).append(out)
    anchor_of = _anchor_finder(groups, group_of)
    emulation = _emulation(program, samples if calibration is None else calibration, precision)
    walks = [
        _SampleWalk(program, samples[sample], sample_outputs, anchor_of, groups, group_of)
        for sample, sample_outputs in sorted(by_sample.items())
        if sample < len(samples)
    ]
    plan = _plan(order, topo, sites, groups, release_values)
    options = (comparators, tie_tolerance, emulation, floor_units)
    rows: list[GapRow] = []
    noted: set[int] = set()
    for step, node in enumerate(order):
        for site in plan.starts.get(step, ()):
            for walk in walks:
                walk.branch(site, record_of[site.node])
        if node.graph is graph:
            for walk in walks:
                walk.evaluate(node)
        if stats is not None:
            _note_peak(stats, walks)
        for gi in plan.ready.get(step, ()):
            slots = _group_slots(gi, groups[gi], walks, noted, emulation)
            rows += _build_rows(groups, topo, slots, *options)
        for released in plan.dying.get(step, ()):
            for walk in walks:
                walk.release(released)
    missing = {  # a handle with no node of the program (e.g. a nested cond)
        (gi, 0): _Slot(status="no_reference") for gi, g in enumerate(groups) if g.anchor is None
    }
    rows += _build_rows(groups, topo, missing, *options)
    rows.sort(key=lambda r: (r.group, r.output_index))
    _mark_flips(rows, groups, sites, records)
    return groups, rows, records


def _note_peak(stats: WalkStats, walks: list[_SampleWalk]) -> None:
    """Fold the op outputs held now into `stats` (parameters and inputs belong to the program)."""
    held = [v for w in walks for n, v in w.env.items() if n.op == "call_function"]
    stats.peak_values = max(stats.peak_values, len(held))
    stats.peak_bytes = max(stats.peak_bytes, sum(_tensor_bytes(v) for v in held))


def _emulation(
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    precision: str | None,
) -> PrecisionEmulation | None:
    """The precision emulation of the expected error; int8 scales from the reference values."""
    if precision is None:
        return None
    emulation = PrecisionEmulation(precision, constant_placeholders(program))
    if precision == "int8":  # as the lower stage calibrates: over every representative input
        max_abs_ranges_streamed(program, samples, emulation.ranges)
    return emulation
