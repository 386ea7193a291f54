"""Ops ExecuTorch folded into an XNode at lowering, found in the reference program's graph.

Before serializing, ExecuTorch's XNNPACK passes fold a batch norm that follows a convolution
into its weights and a following activation (relu, hardtanh, clamp) into the node's
`output_min_max`; those ops get no XNode of their own, yet the XNode's kernel computes them.
From the XNode's op, the single-user chain is followed while the next op is of a foldable kind
and its handle is in the call's partition but on no XNode; an activation is taken only if the
XNode has an output range, and ends the chain. A handle two XNodes could claim is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from stages.formats.executorch.xnnpack_graph import XnnpackGraph
from stages.handles.debug_handles import DEBUG_HANDLE_META, DebugHandle

FOLDED_INTO_WEIGHTS = frozenset(
    {"batch_norm", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit"}
)
FOLDED_INTO_RANGE = frozenset({"relu", "relu_", "hardtanh", "hardtanh_", "clamp", "relu6"})


def _base(node: torch.fx.Node) -> str:
    name = getattr(node.target, "__name__", str(node.target))
    return name.split(".")[0]


def _handle(node: torch.fx.Node) -> DebugHandle | None:
    value = node.meta.get(DEBUG_HANDLE_META)
    return int(value) if isinstance(value, int) else None


def folded_handles(
    program: torch.export.ExportedProgram,
    graph: XnnpackGraph,
    partition: Iterable[DebugHandle],
) -> dict[int, tuple[DebugHandle, ...]]:
    """{XNode position: handles of ops folded into it}, only where the chain is unambiguous."""
    on_xnodes = {n.debug_handle for n in graph.nodes}
    free = set(partition) - on_xnodes
    if not free:
        return {}
    last_of: dict[DebugHandle, torch.fx.Node] = {}
    for node in program.graph_module.graph.nodes:  # topological: the last node of a handle
        handle = _handle(node) if node.op == "call_function" else None
        if handle is not None:
            last_of[handle] = node
    claims: dict[DebugHandle, list[int]] = {}
    for xnode in graph.nodes:
        start = last_of.get(xnode.debug_handle)
        if start is None:
            continue
        for handle in _chain(start, free, xnode.has_output_range):
            claims.setdefault(handle, []).append(xnode.position)
    found: dict[int, list[DebugHandle]] = {}
    for handle, positions in claims.items():
        if len(set(positions)) == 1:
            found.setdefault(positions[0], []).append(handle)
    return {p: tuple(sorted(h)) for p, h in found.items()}


def _chain(start: torch.fx.Node, free: set[DebugHandle], has_range: bool) -> list[DebugHandle]:
    taken: list[DebugHandle] = []
    current = start
    while len(current.users) == 1:
        (following,) = current.users
        if _base(following) == "getitem":  # an output of a multi-output op (batch norm)
            current = following
            continue
        handle = _handle(following)
        if handle is None or handle not in free:
            break
        kind = _base(following)
        if kind in FOLDED_INTO_WEIGHTS:
            taken.append(handle)
            current = following
            continue
        if kind in FOLDED_INTO_RANGE and has_range:
            taken.append(handle)
        break
    return taken
