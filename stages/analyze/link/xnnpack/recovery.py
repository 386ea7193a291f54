"""Recover which ops ExecuTorch's XNNPACK kernel events ran, when the delegate gave no map.

ExecuTorch 1.5.1's XNNPACK `preprocess` returns an empty `debug_handle_map`, and its profiler
names kernels `<operator type> #<n>` per delegate call. The serialized XNNPACK graph of each
call (`stages.formats.executorch.xnnpack_graph`) carries every node's debug handle; aligning the call's
kernel sequence to it (`xnnpack_alignment`) gives each kernel the handles of its XNode(s). The
result is an identifier → handles map per delegate call, marked `map_source="recovered"` so
every output says so. A partition whose backend filled its own map keeps that map.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.analyze.link.linking import ProgramIndex, identifier_of
from stages.analyze.link.xnnpack.alignment import FUSES_INTO, Placement, align
from stages.analyze.link.xnnpack.folds import folded_handles
from stages.formats.etdump import ETDumpData
from stages.formats.etrecord_types import RECOVERED_MAP, DelegateMapRecord
from stages.formats.executorch.xnnpack_graph import XnnpackGraph
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier

XNNPACK_BACKEND = "XnnpackBackend"


@dataclass(frozen=True)
class UnlinkedKernel:
    """A kernel event recovery could not place, and why."""

    instruction_id: int
    identifier: str
    reason: str


@dataclass
class RecoveryReport:
    """What recovery did, per delegate call, for summary.json and the report."""

    graph_source: str = ""
    partitions: dict[int, str] = field(default_factory=dict)
    kernels: int = 0
    linked: int = 0
    unlinked: list[UnlinkedKernel] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for kernel in self.unlinked:
            reasons[kernel.reason] = reasons.get(kernel.reason, 0) + 1
        return {
            "method": "recovered from the serialized XNNPACK graph's debug handles and the "
            "runtime's operator sequence (not the delegate's own map)",
            "graph_source": self.graph_source,
            "kernels": self.kernels,
            "linked": self.linked,
            "unlinked": len(self.unlinked),
            "linked_share": self.linked / self.kernels if self.kernels else None,
            "unlinked_reasons": reasons,
            "unlinked_kernels": [dataclasses.asdict(k) for k in self.unlinked],
            "partitions": {str(i): status for i, status in sorted(self.partitions.items())},
        }


def link_source_counts(events: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Events per `link_source` (map / recovered / none), for summary.json."""
    counts: dict[str, int] = {}
    for event in events:
        source = str(event.get("link_source", "none"))
        counts[source] = counts.get(source, 0) + 1
    return counts


def needs_recovery(index: ProgramIndex) -> list[int]:
    """Delegate instructions of XNNPACK partitions whose backend emitted no map of its own."""
    return sorted(
        instruction
        for instruction, record in index.delegate_instructions.items()
        if record.backend_name == XNNPACK_BACKEND and not record.debug_handle_map
    )


def kernel_sequences(dump: ETDumpData, instructions: Iterable[int]) -> dict[int, list[list[str]]]:
    """Per delegate instruction, the distinct kernel sequences of its calls (identifiers in
    order), first seen first: a call repeats its sequence every execution, kept once, so a long
    run holds no more than a short one."""
    wanted = set(instructions)
    calls: dict[int, list[list[str]]] = {i: [] for i in wanted}
    distinct: set[tuple[int, tuple[str, ...]]] = set()

    def add(instruction: int, sequence: list[str]) -> None:
        key = (instruction, tuple(sequence))
        if key not in distinct:
            distinct.add(key)
            calls[instruction].append(sequence)

    for block in dump.run_data:
        current: dict[int, list[str]] = {}
        for event in block.events:
            pe = event.profile_event
            if pe is None or pe.instruction_id not in wanted:
                continue
            ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
            if not isinstance(ident, str):
                if current.get(pe.instruction_id):  # the call's own event ends it
                    add(pe.instruction_id, current.pop(pe.instruction_id))
                continue
            sequence = current.setdefault(pe.instruction_id, [])
            if ident in sequence:  # the same call ran again without its own event between
                add(pe.instruction_id, current.pop(pe.instruction_id))
                sequence = current.setdefault(pe.instruction_id, [])
            sequence.append(ident)
        for instruction, sequence in current.items():
            if sequence:
                add(instruction, sequence)
    return calls


def recover_links(
    index: ProgramIndex,
    dump: ETDumpData,
    graphs: dict[int, XnnpackGraph],
    source: str,
    program: torch.export.ExportedProgram | None = None,
) -> tuple[ProgramIndex, RecoveryReport]:
    """The index with recovered identifier maps for every XNNPACK call that lacks its own;
    with the reference `program`, ops folded into an XNode at lowering join its kernels."""
    report = RecoveryReport(graph_source=source)
    for instruction, record in index.delegate_instructions.items():
        if record.backend_name == XNNPACK_BACKEND and record.debug_handle_map:
            report.partitions[instruction] = "the delegate's own map (no recovery)"
    targets = needs_recovery(index)
    sequences = kernel_sequences(dump, targets)
    replaced: dict[int, DelegateMapRecord] = {}
    for instruction in targets:
        record = index.delegate_instructions[instruction]
        calls = sequences.get(instruction, [])
        kernels = sorted({name for call in calls for name in call})
        if not kernels:
            report.partitions[instruction] = "no kernel events in the ETDump"
            continue
        report.kernels += len(kernels)
        graph = graphs.get(instruction)
        if graph is None:
            why = "no serialized XNNPACK graph for this call (pass analyze.pte=PATH to the .pte)"
        elif any(call != calls[0] for call in calls):
            why = "the call's kernel sequence differs between executions"
        else:
            why = ""
        if why:
            report.partitions[instruction] = f"not recovered: {why}"
            report.unlinked += [UnlinkedKernel(instruction, k, why) for k in kernels]
            continue
        assert graph is not None
        folds = folded_handles(program, graph, record.delegated_handles) if program else {}
        mapping, unlinked = _recover_call(
            graph, calls[0], _known(index, record), instruction, folds
        )
        report.linked += len(mapping)
        report.unlinked += unlinked
        report.partitions[instruction] = f"recovered {len(mapping)} of {len(calls[0])} kernels"
        replaced[instruction] = dataclasses.replace(
            record, debug_handle_map=dict(mapping), map_source=RECOVERED_MAP
        )
    return _with_maps(index, replaced), report


def _known(index: ProgramIndex, record: DelegateMapRecord) -> set[DebugHandle]:
    """Handles an XNode may name: the partition's, else any op of the program."""
    return set(record.delegated_handles) or set(index.handles)


def _recover_call(
    graph: XnnpackGraph,
    identifiers: list[str],
    known: set[DebugHandle],
    instruction: int,
    folds: dict[int, tuple[DebugHandle, ...]],
) -> tuple[dict[DelegateIdentifier, tuple[DebugHandle, ...]], list[UnlinkedKernel]]:
    """identifier → handles for the kernels placed with certainty; the others with reasons."""
    nodes = graph.nodes
    placements, runs_none = align(nodes, identifiers)
    handle_of = {n.position: n.debug_handle for n in nodes if n.debug_handle in known}
    mapping: dict[DelegateIdentifier, tuple[DebugHandle, ...]] = {}
    unlinked: list[UnlinkedKernel] = []
    for name, placement in zip(identifiers, placements, strict=True):
        handles, why = _handles_of(placement, handle_of, graph)
        if handles:
            mapping[name] = handles
        else:
            unlinked.append(UnlinkedKernel(instruction, name, why))
    _add_fused(mapping, identifiers, placements, runs_none, graph, handle_of, folds)
    return mapping, unlinked


def _handles_of(
    placement: Placement, handle_of: dict[int, int], graph: XnnpackGraph
) -> tuple[tuple[DebugHandle, ...], str]:
    """The one op handle every candidate XNode carries, or () and why there is none."""
    if not placement.nodes:
        return (), placement.reason or "fits no XNode"
    kinds = ", ".join(sorted({graph.nodes[i].kind for i in placement.nodes}))
    found = {handle_of[i] for i in placement.nodes if i in handle_of}
    carried = sum(1 for i in placement.nodes if i in handle_of)
    if not found:
        return (), f"stands for XNodes no op of the model carries ({kinds}, inserted by ExecuTorch)"
    if carried < len(placement.nodes):
        return (), f"could be one of XNodes {list(placement.nodes)} ({kinds}), not all of an op"
    if len(found) > 1:
        return (), f"could be one of XNodes {list(placement.nodes)} of different ops"
    return (found.pop(),), ""


def _add_fused(
    mapping: dict[DelegateIdentifier, tuple[DebugHandle, ...]],
    identifiers: list[str],
    placements: list[Placement],
    runs_none: list[bool],
    graph: XnnpackGraph,
    handle_of: dict[int, int],
    folds: dict[int, tuple[DebugHandle, ...]],
) -> None:
    """Nodes XNNPACK ran inside a neighbour (a clamp in its producer), and ops ExecuTorch
    folded into an XNode at lowering, join the kernels of the node that computes them."""
    kernels_of: dict[int, list[str]] = {}
    for name, placement in zip(identifiers, placements, strict=True):
        if len(placement.nodes) == 1 and name in mapping:
            kernels_of.setdefault(placement.nodes[0], []).append(name)
    for position, handles in folds.items():
        for name in kernels_of.get(position, []):
            mapping[name] = tuple(sorted({*mapping[name], *handles}))
    for node in graph.nodes:
        side = FUSES_INTO.get(node.kind)
        if side is None or not runs_none[node.position] or node.position not in handle_of:
            continue
        host = _neighbour(graph, node.position, side)
        for name in kernels_of.get(host, []) if host is not None else []:
            mapping[name] = tuple(sorted({*mapping[name], handle_of[node.position]}))


def _neighbour(graph: XnnpackGraph, position: int, side: str) -> int | None:
    """The node producing `position`'s input (producer) or reading its output (consumer)."""
    node = graph.nodes[position]
    if side == "producer":
        hosts = [n for n in graph.nodes[:position] if node.inputs and node.inputs[0] in n.outputs]
        return hosts[-1].position if hosts else None
    readers = [n for n in graph.nodes[position + 1 :] if set(node.outputs) & set(n.inputs)]
    return readers[0].position if len(readers) == 1 else None


def _with_maps(index: ProgramIndex, replaced: dict[int, DelegateMapRecord]) -> ProgramIndex:
    if not replaced:
        return index
    by_partition = {r.partition_id: r for r in replaced.values()}
    return dataclasses.replace(
        index,
        delegate_instructions={
            i: replaced.get(i, r) for i, r in index.delegate_instructions.items()
        },
        maps=tuple(by_partition.get(m.partition_id, m) for m in index.maps),
    )
