"""Did instrumentation change what runs? The instrumented `.pte` against the shipped one.

Compared: the number of delegate calls (partitions), each partition's serialized XNNPACK node
kinds and counts, and, per op of the program, where it runs (which partition, or outside every
delegate), which XNNPACK nodes carry its debug handle and which ops its kernel computes with it
(`fusion_groups`: a BatchNorm the taps un-fused from its convolution runs in a node of its own).
An op whose placement, nodes or group differ, or that one program has and the other lacks, had
its fusion (or delegation) changed by the taps. Tap outputs add no XNNPACK node when they leave
a kernel as it is; the check reports any that do.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from stages.formats.executorch.delegates import read_delegate_payloads
from stages.formats.executorch.xnnpack_graph import (
    XnnpackGraphError,
    is_xnnpack_payload,
    read_xnnpack_graph,
)
from stages.lower.executorch.fusion_groups import (
    COPY_KINDS,
    GraphNode,
    fusion_groups,
    kernels_by_op,
)
from stages.lower.executorch.tap_points import (
    delegate_calls,
    delegate_instructions,
    handles_by_name,
)

Placement = dict[str, Any]
__all__ = ["COPY_KINDS", "Placement", "compare_programs", "op_placements", "xnnpack_ops"]


def _xnnpack_nodes(pte: bytes, where: str) -> list[list[GraphNode]]:
    """Per delegate call in order: the XNodes of its XNNPACK graph ([] for other backends)."""
    found = []
    for payload in read_delegate_payloads(pte, where):
        nodes: list[GraphNode] = []
        if is_xnnpack_payload(payload.processed):
            try:
                graph = read_xnnpack_graph(payload.processed, where)
                nodes = [
                    GraphNode(n.kind, n.debug_handle, tuple(n.inputs), tuple(n.outputs))
                    for n in graph.nodes
                ]
            except XnnpackGraphError:
                nodes = []
        found.append(nodes)
    return found


def _producers(etrecord: Any) -> tuple[dict[str, list[str]], list[str]]:
    """Each op's input ops by name, and the ops in graph order, of the program ExecuTorch
    lowered (the names `handles_by_name` gives)."""
    producers: dict[str, list[str]] = {}
    order: list[str] = []
    for node in etrecord.exported_program.graph_module.graph.nodes:
        if node.op == "call_function":
            order.append(node.name)
            inputs = [a.name for a in node.all_input_nodes if a.op == "call_function"]
            producers[node.name] = inputs
    return producers, order


def op_placements(pte: bytes, etrecord: Any, where: str = "program") -> dict[str, Placement]:
    """Op name → its partition (index of its delegate call, None outside), the XNNPACK node
    kinds carrying its handle and the other ops its kernel computes (`fused_with`)."""
    names = handles_by_name(etrecord)
    instructions = delegate_instructions(etrecord)
    calls = delegate_calls(etrecord) or sorted(set(instructions.values()))
    order = {iid: i for i, iid in enumerate(calls)}
    graphs = _xnnpack_nodes(pte, where)
    producers, graph_order = _producers(etrecord)
    placements: dict[str, Placement] = {}
    for name, handle in names.items():
        iid = instructions.get(handle)
        partition = order.get(iid) if iid is not None else None
        nodes = graphs[partition] if partition is not None and partition < len(graphs) else []
        kinds = sorted(n.kind for n in nodes if n.handle == handle)
        placements[name] = {"partition": partition, "xnnpack_nodes": kinds, "fused_with": []}
    for partition, nodes in enumerate(graphs):
        inside = {n: names[n] for n, p in placements.items() if p["partition"] == partition}
        groups = fusion_groups(kernels_by_op(nodes, inside, producers, graph_order))
        for name, group in groups.items():
            placements[name]["fused_with"] = [other for other in group if other != name]
    return placements


def _partition_counts(pte: bytes, where: str) -> list[dict[str, int]]:
    return [
        dict(sorted(Counter(n.kind for n in nodes).items())) for nodes in _xnnpack_nodes(pte, where)
    ]


def compare_programs(
    plain: bytes, tapped: bytes, plain_ops: dict[str, Placement], tapped_ops: dict[str, Placement]
) -> dict[str, Any]:
    """The `instrumentation` record of the lower stage: partitions, XNNPACK node counts per
    partition, the ops whose fusion or placement the taps changed."""
    shipped = _partition_counts(plain, "shipped program")
    instrumented = _partition_counts(tapped, "instrumented program")
    changed_ops = sorted(
        name
        for name, place in plain_ops.items()
        if _among(tapped_ops.get(name), set(plain_ops)) != place
    )  # an op the instrumented program lacks (no handle of its own there) changed too
    per_partition = [
        {
            "partition": i,
            "shipped": shipped[i] if i < len(shipped) else None,
            "instrumented": instrumented[i] if i < len(instrumented) else None,
        }
        for i in range(max(len(shipped), len(instrumented)))
    ]
    differing = [p["partition"] for p in per_partition if p["shipped"] != p["instrumented"]]
    copies = _added_copies(per_partition)
    computing = [p for p in differing if p not in copies]
    return {
        "partitions": {"shipped": len(shipped), "instrumented": len(instrumented)},
        "xnnpack_nodes_per_partition": per_partition,
        "partitions_with_other_nodes": differing,
        "copies_added": copies,
        "fusion_changed_ops": changed_ops,
        "fusion_changes": {
            n: {"shipped": plain_ops[n], "instrumented": tapped_ops.get(n)} for n in changed_ops
        },
        "changed_what_ran": bool(computing or changed_ops or len(shipped) != len(instrumented)),
    }


def _among(place: Placement | None, known: set[str]) -> Placement | None:
    """`place` with its fusion group cut to the `known` ops (a tap op the instrumented program
    adds may share its tapped op's handle, and so its kernel: that leaves the kernel as is)."""
    if place is None:
        return None
    return {**place, "fused_with": [n for n in place.get("fused_with", []) if n in known]}


def _added_copies(per_partition: list[dict[str, Any]]) -> dict[int, dict[str, int]]:
    """Partitions whose only difference is added copy nodes (COPY_KINDS): partition → the
    nodes added."""
    found = {}
    for item in per_partition:
        shipped, instrumented = item["shipped"] or {}, item["instrumented"] or {}
        if shipped == instrumented or item["shipped"] is None or item["instrumented"] is None:
            continue
        kinds = set(shipped) | set(instrumented)
        added = {k: instrumented.get(k, 0) - shipped.get(k, 0) for k in kinds}
        if all(k in COPY_KINDS and n >= 0 for k, n in added.items() if n):
            found[item["partition"]] = {k: n for k, n in sorted(added.items()) if n}
    return found


def xnnpack_ops(placements: dict[str, Placement], fused: dict[str, str]) -> list[str]:
    """Ops XNNPACK computes: an XNode other than a copy carries the op's handle, or the op is
    an activation fused into such an op (`fused`: activation → the op it follows). An op whose
    handle only a delegated quantize/convert carries runs outside."""
    computes = {
        name
        for name, place in placements.items()
        if any(kind not in COPY_KINDS for kind in place["xnnpack_nodes"])
    }
    return sorted(computes | {act for act, op in fused.items() if op in computes})
