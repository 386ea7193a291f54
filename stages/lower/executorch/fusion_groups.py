"""Which XNNPACK kernel computes each op of a lowered program, and the ops it computes together.

An op computes in the XNode that carries its debug handle; an op with none of its own (a
BatchNorm folded into its convolution, a ReLU fused as the kernel's output range) computes in
its producer's kernel, unless a computing XNode that carries no op's handle reads that kernel's
output (through copies only): XNNPACK made that node for it (a BatchNorm it could not fuse
becomes a depthwise convolution with no handle). Ops sharing a kernel are one fusion group; an
op whose group differs between two lowerings of one program ran in another kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Nodes that copy a value (layout, dtype): no computation of the model's (instrumentation_check).
COPY_KINDS = frozenset({"XNNStaticTranspose", "XNNConvert", "XNNCopy"})
# Longest producer chain followed to find a fused op's kernel (a fused chain is a few ops).
_MAX_CHAIN = 32


@dataclass(frozen=True)
class GraphNode:
    """One XNode as the grouping needs it: kind, debug handle, value ids read and written."""

    kind: str
    handle: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def _readers(nodes: Sequence[GraphNode]) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        for value in node.inputs:
            found.setdefault(value, []).append(index)
    return found


def _unowned_reader(
    nodes: Sequence[GraphNode], kernel: int, owned: frozenset[int], claimed: set[int]
) -> int | None:
    """A computing XNode of no known handle, not yet claimed, that reads `kernel`'s output
    (through copy nodes only)."""
    readers = _readers(nodes)
    pending, seen = list(nodes[kernel].outputs), set()
    while pending:
        value = pending.pop(0)
        for index in readers.get(value, []):
            if index in seen:
                continue
            seen.add(index)
            node = nodes[index]
            if node.kind in COPY_KINDS:
                pending.extend(node.outputs)
            elif node.handle not in owned and index not in claimed:
                return index
    return None


def kernels_by_op(
    nodes: Sequence[GraphNode],
    handles: Mapping[str, int],
    producers: Mapping[str, Sequence[str]],
    order: Sequence[str],
) -> dict[str, int]:
    """Op name → index of the XNode that computes it, for the ops of one partition (`handles`:
    their debug handles; `producers`: each op's input ops; `order`: the ops in graph order)."""
    owned = frozenset(handles.values())
    own: dict[int, int] = {}
    for index, node in enumerate(nodes):
        if node.kind not in COPY_KINDS:
            own.setdefault(node.handle, index)
    kernels: dict[str, int] = {}
    claimed: set[int] = set()
    for name in order:
        if name not in handles:
            continue
        if handles[name] in own:
            kernels[name] = own[handles[name]]
            continue
        found = _producer_kernel(name, kernels, producers)
        if found is None:
            continue
        unowned = _unowned_reader(nodes, found, owned, claimed)
        if unowned is not None:
            claimed.add(unowned)
            found = unowned
        kernels[name] = found
    return kernels


def _producer_kernel(
    name: str, kernels: Mapping[str, int], producers: Mapping[str, Sequence[str]]
) -> int | None:
    """The kernel of the nearest op up `name`'s first-input chain that has one."""
    current = name
    for _ in range(_MAX_CHAIN):
        inputs = producers.get(current) or ()
        if not inputs:
            return None
        current = inputs[0]
        if current in kernels:
            return kernels[current]
    return None


def fusion_groups(kernels: Mapping[str, int]) -> dict[str, list[str]]:
    """Op name → every op its kernel computes (itself included), sorted."""
    by_kernel: dict[int, list[str]] = {}
    for name, kernel in kernels.items():
        by_kernel.setdefault(kernel, []).append(name)
    return {name: sorted(by_kernel[kernel]) for name, kernel in kernels.items()}
