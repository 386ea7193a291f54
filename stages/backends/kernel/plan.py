"""Group a partition's nodes into the kernels an emulated delegate runs (the fusion rules).

conv/linear + batch norm + activation + add fuse into one kernel when each feeds only the next.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch

from stages.backends.op_support import ACTIVATIONS, ADDS, ANCHORS, BATCH_NORM
from stages.handles.debug_handles import DEBUG_HANDLE_META, DebugHandle
from stages.op_encoding import getitem_index, op_name


def is_getitem(node: torch.fx.Node) -> bool:
    return node.target is operator.getitem


@dataclass
class KernelPlan:
    """Nodes fused into one kernel, in execution order; `output` is the value it produces."""

    nodes: list[torch.fx.Node]
    output: torch.fx.Node
    handles: list[DebugHandle] = field(default_factory=list)


def _single_user(node: torch.fx.Node, members: set[torch.fx.Node]) -> torch.fx.Node | None:
    """The only user of `node` when it is in the partition and not yet in another kernel."""
    users = list(node.users)
    return users[0] if len(users) == 1 and users[0] in members else None


def _fused_chain(node: torch.fx.Node, members: set[torch.fx.Node]) -> list[torch.fx.Node]:
    """An anchor op and the batch norm, activation and add that follow it, when they fuse
    (`members` holds only nodes of the anchor's precision: kept-float ops fuse among themselves)."""
    chain, current = [node], node
    nxt = _single_user(current, members)
    if nxt is not None and op_name(nxt.target) in BATCH_NORM and nxt.args[0] is current:
        getitems = [u for u in nxt.users if is_getitem(u)]
        if not getitems:  # aten.batch_norm: one output
            chain.append(nxt)
            current = nxt
        elif len(getitems) == 1 and getitem_index(getitems[0]) == 0:
            chain += [nxt, getitems[0]]
            current = getitems[0]
    nxt = _single_user(current, members)
    if nxt is not None and op_name(nxt.target) in ACTIVATIONS and nxt.args[0] is current:
        chain.append(nxt)
        current = nxt
    nxt = _single_user(current, members)
    if nxt is not None and op_name(nxt.target) in ADDS and current in nxt.args[:2]:
        chain.append(nxt)
    return chain


def plan_kernels(
    nodes: list[torch.fx.Node], fuse: bool = True, keep_float: frozenset[str] = frozenset()
) -> list[KernelPlan]:
    """Group a partition's op nodes into kernels; fused chains end at their last node and never
    mix ops kept at fp32 (`keep_float`) with the others."""
    taken: set[torch.fx.Node] = set()
    plans: list[KernelPlan] = []
    for node in nodes:
        if node in taken or is_getitem(node):
            continue
        kept = node.name in keep_float
        members = {n for n in nodes if (n.name in keep_float) == kept} - taken
        fusing = fuse and op_name(node.target) in ANCHORS
        chain = _fused_chain(node, members) if fusing else [node]
        taken.update(chain)
        handles = sorted({int(n.meta[DEBUG_HANDLE_META]) for n in chain})
        plans.append(KernelPlan(nodes=chain, output=chain[-1], handles=handles))
    # Run each kernel where its last node stood: every input of a fused chain exists by then.
    order = {n: i for i, n in enumerate(nodes)}
    plans.sort(key=lambda p: order[p.nodes[-1]])
    return plans
