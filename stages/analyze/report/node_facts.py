"""Per node of the exported program: where it ran, its share of the time, its numeric gap.

The graph views (Model Explorer overlays, the report's partition view) are drawn from these
facts. Nodes are the exported program's fx nodes, named as in `exported.pt2`; every number comes
from the ETRecord's handle info and delegate maps plus the event and gap tables, so an analysis of
a bring-your-own ETDump gets the same views.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stages.formats.etdump.records import DELEGATE_CALL_EVENT, LOAD_BLOCK, METHOD_EVENT
from stages.formats.etrecord import DelegateMapRecord, HandleInfo
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier

DELEGATED = "delegated"
LEFT_OUT = "left_out"
NOT_DELEGATED = "not_delegated"


@dataclass(frozen=True)
class Placement:
    """Where one op ran: inside a delegate partition (and which kernel), or outside and why."""

    kind: str
    backend: str = ""
    partition_id: int | None = None
    kernel: DelegateIdentifier | None = None
    reason: str = ""

    def label(self) -> str:
        """'xnnpack partition 2', 'left out: <reason>' or 'not delegated'."""
        if self.kind == DELEGATED:
            return f"{self.backend} partition {self.partition_id}"
        if self.kind == LEFT_OUT:
            return f"left out: {self.reason}"
        return "not delegated"


@dataclass
class NodeFacts:
    """One exported-program node with everything the graph views show for it."""

    name: str
    handle: DebugHandle
    op_type: str
    module: str
    placement: Placement
    latency: float | None = None
    latency_shared_by: int = 1
    local_gap: float | None = None
    accumulated_gap: float | None = None
    diverged: bool = False
    first_divergence: bool = False
    gap_statuses: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GapScale:
    """How to read the gap numbers: metric, threshold, and which direction is better."""

    metric: str
    threshold: float | None
    higher_is_better: bool


def _placements(
    maps: Sequence[DelegateMapRecord], rejected: Iterable[dict[str, Any]]
) -> dict[DebugHandle, Placement]:
    placements: dict[DebugHandle, Placement] = {}
    for record in rejected:
        handle = record.get("debug_handle")
        if isinstance(handle, int):
            placements[handle] = Placement(LEFT_OUT, reason=str(record.get("reason", "")))
    for m in maps:
        for h in m.delegated_handles:  # delegated, though no kernel names it (folded away)
            placements[h] = Placement(DELEGATED, m.backend_name, m.partition_id)
        for identifier, handles in m.debug_handle_map.items():
            for h in handles:
                if placements.get(h, Placement(LEFT_OUT)).kernel is None:
                    placements[h] = Placement(DELEGATED, m.backend_name, m.partition_id, identifier)
    return placements


def collect_nodes(
    handles: dict[DebugHandle, HandleInfo],
    maps: Sequence[DelegateMapRecord],
    rejected: Iterable[dict[str, Any]],
) -> list[NodeFacts]:
    """Nodes in graph order (handles are numbered in topological order), with their placement."""
    placements = _placements(maps, rejected)
    nodes: list[NodeFacts] = []
    seen: set[str] = set()
    for handle in sorted(handles):
        info = handles[handle]
        for index, name in enumerate(info.op_names):
            if name in seen:  # a name reused inside a control-flow subgraph: keep the first
                continue
            seen.add(name)
            nodes.append(
                NodeFacts(
                    name=name,
                    handle=handle,
                    op_type=info.op_types[index] if index < len(info.op_types) else "",
                    module=info.module_hierarchy[index]
                    if index < len(info.module_hierarchy)
                    else "",
                    placement=placements.get(handle, Placement(NOT_DELEGATED)),
                )
            )
    return nodes


def _is_op_event(event: dict[str, Any]) -> bool:
    return (
        event.get("event_name") not in (METHOD_EVENT, DELEGATE_CALL_EVENT)
        and event.get("event_block_name") != LOAD_BLOCK
        and bool(event.get("debug_handles"))
    )


def add_latency(nodes: list[NodeFacts], events: Iterable[dict[str, Any]]) -> None:
    """Each op event's p50 split evenly over the nodes of its handles (a fused kernel's ops)."""
    by_handle: dict[DebugHandle, list[NodeFacts]] = {}
    for node in nodes:
        by_handle.setdefault(node.handle, []).append(node)
    for event in events:
        if not _is_op_event(event):
            continue
        covered = [n for h in event["debug_handles"] for n in by_handle.get(int(h), [])]
        p50 = float(event.get("p50", math.nan))
        if not covered or not math.isfinite(p50):
            continue
        for node in covered:
            node.latency = (node.latency or 0.0) + p50 / len(covered)
            node.latency_shared_by = max(node.latency_shared_by, len(covered))


def _worse(current: float | None, value: float, higher_is_better: bool) -> float:
    if current is None or math.isnan(current):
        return value
    return min(current, value) if higher_is_better else max(current, value)


def add_gaps(
    nodes: list[NodeFacts],
    gaps: Iterable[dict[str, Any]],
    scale: GapScale,
    first_handles: Iterable[DebugHandle] = (),
) -> None:
    """Each compared group's local and accumulated gap on every node of its handles (worst wins)."""
    by_handle: dict[DebugHandle, list[NodeFacts]] = {}
    for node in nodes:
        by_handle.setdefault(node.handle, []).append(node)
    first = {int(h) for h in first_handles}
    for gap in gaps:
        covered = [n for h in gap.get("debug_handles", []) for n in by_handle.get(int(h), [])]
        accumulated = _number(gap.get(scale.metric))
        local = _number(gap.get(f"local_{scale.metric}", gap.get(scale.metric)))
        for node in covered:
            node.gap_statuses.append(str(gap.get("status", "")))
            node.diverged = node.diverged or bool(gap.get("diverged"))
            if accumulated is not None:
                node.accumulated_gap = _worse(
                    node.accumulated_gap, accumulated, scale.higher_is_better
                )
            if local is not None:
                node.local_gap = _worse(node.local_gap, local, scale.higher_is_better)
    for node in nodes:
        node.first_divergence = node.handle in first


def _number(value: Any) -> float | None:
    """A float from a table cell (floats, or 'inf'/'-inf'/'nan' strings); None if absent."""
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def build_node_facts(
    handles: dict[DebugHandle, HandleInfo],
    maps: Sequence[DelegateMapRecord],
    rejected: Iterable[dict[str, Any]],
    events: Iterable[dict[str, Any]],
    gaps: Iterable[dict[str, Any]],
    scale: GapScale,
    first_handles: Iterable[DebugHandle] = (),
) -> list[NodeFacts]:
    """Nodes in graph order with placement, split latency and worst gaps."""
    nodes = collect_nodes(handles, maps, rejected)
    add_latency(nodes, events)
    add_gaps(nodes, gaps, scale, first_handles)
    return nodes
