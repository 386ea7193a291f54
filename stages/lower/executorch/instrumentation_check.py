"""Did instrumentation change what runs? The instrumented `.pte` against the shipped one.

Compared: the number of delegate calls (partitions), each partition's serialized XNNPACK node
kinds and counts, and, per op of the program, where it runs (which partition, or outside every
delegate) and which XNNPACK nodes carry its debug handle. An op whose placement or nodes
differ had its fusion (or delegation) changed by the taps. Tap outputs add no XNNPACK node when
they leave a kernel as it is; the check reports any that do.
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
from stages.lower.executorch.tap_points import (
    delegate_calls,
    delegate_instructions,
    handles_by_name,
)

Placement = dict[str, Any]
# Nodes XNNPACK adds to hand a tapped value out in the program's layout and dtype (NHWC→NCHW,
# a dtype conversion): copies of a value, no computation of the model's.
COPY_KINDS = frozenset({"XNNStaticTranspose", "XNNConvert", "XNNCopy"})


def _xnnpack_nodes(pte: bytes, where: str) -> list[list[tuple[str, int]]]:
    """Per delegate call in order: (XNode kind, debug handle) of its XNNPACK graph ([] for other
    backends)."""
    found = []
    for payload in read_delegate_payloads(pte, where):
        nodes: list[tuple[str, int]] = []
        if is_xnnpack_payload(payload.processed):
            try:
                graph = read_xnnpack_graph(payload.processed, where)
                nodes = [(n.kind, n.debug_handle) for n in graph.nodes]
            except XnnpackGraphError:
                nodes = []
        found.append(nodes)
    return found


def op_placements(pte: bytes, etrecord: Any, where: str = "program") -> dict[str, Placement]:
    """Op name → its partition (index of its delegate call, None outside) and the XNNPACK node
    kinds carrying its handle."""
    names = handles_by_name(etrecord)
    instructions = delegate_instructions(etrecord)
    calls = delegate_calls(etrecord) or sorted(set(instructions.values()))
    order = {iid: i for i, iid in enumerate(calls)}
    graphs = _xnnpack_nodes(pte, where)
    placements: dict[str, Placement] = {}
    for name, handle in names.items():
        iid = instructions.get(handle)
        partition = order.get(iid) if iid is not None else None
        nodes = graphs[partition] if partition is not None and partition < len(graphs) else []
        kinds = sorted(kind for kind, h in nodes if h == handle)
        placements[name] = {"partition": partition, "xnnpack_nodes": kinds}
    return placements


def _partition_counts(pte: bytes, where: str) -> list[dict[str, int]]:
    return [
        dict(sorted(Counter(k for k, _ in nodes).items())) for nodes in _xnnpack_nodes(pte, where)
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
        if name in tapped_ops and tapped_ops[name] != place
    )
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
            n: {"shipped": plain_ops[n], "instrumented": tapped_ops[n]} for n in changed_ops
        },
        "changed_what_ran": bool(computing or changed_ops or len(shipped) != len(instrumented)),
    }


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
