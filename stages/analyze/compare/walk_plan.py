"""At which step of the walk each cond takes its branch, each group is compared and each
reference value is released."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from stages.analyze.compare.gap.groups import GapGroup, is_getitem
from stages.analyze.compare.local_rerun import MAX_UPSTREAM_OPS
from stages.analyze.compare.reference_stream import Liveness, graph_liveness
from stages.analyze.link.control_flow import CondSite, predicate_source


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
    anchors = {g.anchor for g in groups if g.anchor is not None}
    for step, ready_groups in ready.items():
        for gi in ready_groups:
            members = set(groups[gi].nodes)
            live.read(members, step)
            live.read(_upstream_inputs(members, anchors), step)
            for node in members:
                for arg in node.all_input_nodes:
                    live.read([arg], step)
                    if is_getitem(arg):
                        live.read(arg.all_input_nodes, step)
    return live


def _upstream_inputs(
    members: set[torch.fx.Node], anchors: set[torch.fx.Node]
) -> set[torch.fx.Node]:
    """The values a group's expected error may re-run its unobserved upstream ops from
    (local_rerun.emulated_upstream): the inputs of the ops before it up to the nearest ops a
    runtime value can stand in for (group anchors), at most MAX_UPSTREAM_OPS of them."""
    chain: set[torch.fx.Node] = set()
    stack = [a for n in members for a in n.all_input_nodes if a not in members]
    while stack and len(chain) <= MAX_UPSTREAM_OPS:
        node = stack.pop()
        if node in chain or node in anchors or node.op != "call_function":
            continue
        chain.add(node)
        stack.extend(node.all_input_nodes)
    return {a for n in chain for a in n.all_input_nodes} | chain


@dataclass(frozen=True)
class WalkPlan:
    """At which step of the walk each cond takes its branch, each group is compared and each
    node's reference value is released (none when values are kept)."""

    starts: dict[int, list[CondSite]]
    ready: dict[int, list[int]]
    dying: dict[int, list[torch.fx.Node]]


def plan_walk(
    order: Sequence[torch.fx.Node],
    topo: dict[torch.fx.Node, int],
    sites: list[CondSite],
    groups: list[GapGroup],
    release_values: bool,
) -> WalkPlan:
    starts: dict[int, list[CondSite]] = {}
    for site in sites:  # branch ops come just before their cond in `order`
        nodes = [*site.branch_nodes(True), *site.branch_nodes(False), site.node]
        starts.setdefault(min(topo[n] for n in nodes), []).append(site)
    ready: dict[int, list[int]] = {}
    for gi, group in enumerate(groups):
        if group.anchor is not None:
            ready.setdefault(max(topo[n] for n in group.nodes), []).append(gi)
    dying = _liveness(order, starts, ready, groups).dying() if release_values else {}
    return WalkPlan(starts, ready, dying)
