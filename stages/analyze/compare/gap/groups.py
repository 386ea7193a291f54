"""Runtime outputs grouped by overlapping debug-handle sets, in topological order of the node
each group compares (its anchor), and the runtime value each group compares."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.analyze.link.linking import Link
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier, get_debug_handle

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
    # The same ops as nodes in graph order (getitems included), for the expected error's re-run.
    unobserved_nodes: list[torch.fx.Node] = field(default_factory=list)


def is_getitem(node: torch.fx.Node) -> bool:
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
        ops = [n for n in nodes if not is_getitem(n)]
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


def anchor_finder(
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
                if not is_getitem(n) and get_debug_handle(n) in wanted
            ]
            cache[handles] = nodes[-1] if nodes else None
        return cache[handles]

    return anchor_of


def group_values(
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
