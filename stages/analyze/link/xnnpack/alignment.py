"""Align one XNNPACK delegate call's kernel events to its serialized XNodes, with certainty.

ExecuTorch's XNNPACK profiler logs one event per runtime operator, in XNNPACK's execution
order, named `<operator type> #<n>` (e.g. `Fully Connected (NC, F32) GEMM #1`), with no debug
handle. XNNPACK creates its operators from the serialized nodes in order, except where it fuses
or drops nodes. So each XNode yields between `fewest` and `most` kernels of the operator
families its kind can produce (`KERNEL_FAMILIES`); every way to split the event sequence that
way is counted (dynamic programming in both directions). A kernel is placed only when every
complete alignment puts it on XNodes carrying the same debug handle; otherwise it stays
unplaced, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from stages.formats.executorch.xnnpack_graph import XNode

# Families are operator-type names without their "(layout, type) variant" part, lowercased,
# letters and digits only: "Fully Connected (NC, F32) GEMM" -> "fullyconnected".
_1 = (1, 1)
_ELIDABLE = (0, 1)  # XNNPACK may fuse the node into a neighbour or run it as no operator
KERNEL_FAMILIES: dict[str, tuple[frozenset[str], tuple[int, int]]] = {
    "XNNAdd": (frozenset({"add"}), _1),
    "XNNSubtract": (frozenset({"subtract"}), _1),
    "XNNMultiply": (frozenset({"multiply"}), _1),
    "XNNDiv": (frozenset({"divide"}), _1),
    "XNNMinimum": (frozenset({"minimum"}), _1),
    "XNNMaximum": (frozenset({"maximum"}), _1),
    "XNNPReLU": (frozenset({"prelu"}), _1),
    "XNNFullyConnected": (frozenset({"fullyconnected", "dynamicfullyconnected"}), _1),
    "XNNBatchMatrixMultiply": (frozenset({"batchmatrixmultiply"}), _1),
    # XNNPACK runs a pointwise (1x1, stride 1, unpadded) convolution as a fully-connected GEMM.
    "XNNConv2d": (frozenset({"convolution", "fullyconnected"}), _1),
    "XNNDepthwiseConv2d": (frozenset({"convolution"}), _1),
    "XNNConvTranspose2d": (frozenset({"deconvolution"}), _1),
    "XNNSoftmax": (frozenset({"softmax"}), _1),
    "XNNSigmoid": (frozenset({"sigmoid"}), _1),
    "XNNClamp": (frozenset({"clamp"}), _ELIDABLE),
    "XNNFloor": (frozenset({"floor"}), _1),
    "XNNCeiling": (frozenset({"ceiling"}), _1),
    "XNNSquareRoot": (frozenset({"squareroot"}), _1),
    "XNNReciprocalSquareRoot": (frozenset({"reciprocalsquareroot"}), _1),
    "XNNHardswish": (frozenset({"hardswish"}), _1),
    "XNNLeakyReLU": (frozenset({"leakyrelu"}), _1),
    "XNNNegate": (frozenset({"negate"}), _1),
    "XNNSquare": (frozenset({"square"}), _1),
    "XNNELU": (frozenset({"elu"}), _1),
    "XNNAbs": (frozenset({"abs"}), _1),
    "XNNLog": (frozenset({"log"}), _1),
    "XNNGelu": (frozenset({"gelu", "approxgelu"}), _1),
    "XNNTanh": (frozenset({"tanh"}), _1),
    "XNNExp": (frozenset({"exp"}), _1),
    "XNNSin": (frozenset({"sine"}), _1),
    "XNNCos": (frozenset({"cosine"}), _1),
    "XNNConvert": (frozenset({"convert"}), _1),
    "XNNStaticTranspose": (frozenset({"transpose"}), _ELIDABLE),
    "XNNStaticReshape": (frozenset({"staticreshape", "copy"}), _ELIDABLE),
    "XNNCopy": (frozenset({"copy"}), _ELIDABLE),
    "XNNStaticSlice": (frozenset({"slice"}), _1),
    "XNNStaticConstantPad": (frozenset({"constantpad"}), _ELIDABLE),
    "XNNStaticResizeBilinear2D": (frozenset({"resizebilinear"}), _1),
    "XNNAvgPooling2d": (frozenset({"averagepooling"}), _1),
    "XNNMaxPooling2d": (frozenset({"maxpooling"}), _1),
    "XNNArgMaxPooling2d": (frozenset({"argmaxpooling"}), _1),
    "XNNGlobalAvgPooling2d": (frozenset({"globalaveragepooling", "mean"}), _1),
    "XNNScaledDotProductAttention": (frozenset({"scaleddotproductattention"}), (1, 8)),
    # Concatenation runs as one copy per input (XNNPACK may skip some).
    **{f"XNNConcatenate{n}": (frozenset({"copy", "concatenate"}), (1, n)) for n in range(2, 6)},
}
# Nodes XNNPACK fuses into a neighbour when it runs none of their own: "producer" (the node
# whose output it reads, e.g. a clamp into the preceding convolution) or "consumer".
FUSES_INTO = {"XNNClamp": "producer", "XNNStaticConstantPad": "consumer"}

_COUNTER = re.compile(r"\s*#\d+$")


def kernel_family(identifier: str) -> str:
    """'Fully Connected (NC, F32) GEMM #1' -> 'fullyconnected'."""
    base = _COUNTER.sub("", identifier).split(" (", 1)[0]
    return "".join(ch for ch in base.lower() if ch.isalnum())


@dataclass(frozen=True)
class Placement:
    """Where one kernel went: the XNodes it may stand for, or why it stays unplaced."""

    nodes: tuple[int, ...]
    reason: str = ""


# Binary XNodes with a folded activation (`output_min_max`): XNNPACK runs the op, then a
# separate Clamp operator (seen with ExecuTorch 1.5.1: `Multiply (ND) #1`, `Clamp (NC) #1`).
CLAMPED_BINARY = frozenset({"XNNAdd", "XNNSubtract", "XNNMultiply", "XNNDiv"})


def _clamped(node: XNode) -> bool:
    return node.has_output_range and node.kind in CLAMPED_BINARY


def _fits(node: XNode, family: str) -> bool:
    families = KERNEL_FAMILIES.get(node.kind)
    if families is None:
        return False
    return family in families[0] or (_clamped(node) and family == "clamp")


def _counts(node: XNode) -> range:
    fewest, most = KERNEL_FAMILIES.get(node.kind, (frozenset(), (1, 1)))[1]
    return range(fewest, most + 2 if _clamped(node) else most + 1)


def _forward(nodes: Sequence[XNode], families: Sequence[str]) -> list[dict[int, int]]:
    """ways[i][j]: alignments of the first i nodes to the first j kernels."""
    ways: list[dict[int, int]] = [{0: 1}]
    for node in nodes:
        step: dict[int, int] = {}
        for j, count in ways[-1].items():
            for k in _counts(node):
                if j + k > len(families) or not all(_fits(node, f) for f in families[j : j + k]):
                    continue
                step[j + k] = step.get(j + k, 0) + count
        ways.append(step)
    return ways


def _backward(nodes: Sequence[XNode], families: Sequence[str]) -> list[dict[int, int]]:
    """rest[i][j]: alignments of nodes i.. to kernels j.."""
    total = len(families)
    rest: list[dict[int, int]] = [{} for _ in nodes] + [{total: 1}]
    for i in range(len(nodes) - 1, -1, -1):
        for j_end, count in rest[i + 1].items():
            for k in _counts(nodes[i]):
                j = j_end - k
                if j < 0 or not all(_fits(nodes[i], f) for f in families[j:j_end]):
                    continue
                rest[i][j] = rest[i].get(j, 0) + count
    return rest


def align(nodes: Sequence[XNode], identifiers: Sequence[str]) -> tuple[list[Placement], list[bool]]:
    """Per kernel, the XNodes it may stand for; per node, whether it runs no kernel at all."""
    families = [kernel_family(name) for name in identifiers]
    unknown = sorted({n.kind for n in nodes if n.kind not in KERNEL_FAMILIES})
    if unknown:
        why = f"the graph has XNode kinds without a known kernel family ({', '.join(unknown)})"
        return [Placement((), why) for _ in identifiers], [False] * len(nodes)
    ways, rest = _forward(nodes, families), _backward(nodes, families)
    if ways[-1].get(len(families), 0) == 0:
        why = _no_alignment(ways, nodes, identifiers)
        return [Placement((), why) for _ in identifiers], [False] * len(nodes)
    candidates: list[set[int]] = [set() for _ in identifiers]
    runs_none = [True] * len(nodes)
    for i, node in enumerate(nodes):
        for j, count in ways[i].items():
            for k in _counts(node):
                if (
                    k
                    and count
                    and rest[i + 1].get(j + k, 0)
                    and all(_fits(node, f) for f in families[j : j + k])
                ):
                    runs_none[i] = False
                    for position in range(j, j + k):
                        candidates[position].add(i)
    return [Placement(tuple(sorted(c))) for c in candidates], runs_none


def _no_alignment(ways: list[dict[int, int]], nodes: Sequence[XNode], names: Sequence[str]) -> str:
    """Say how far the kernels fit the graph before they stop fitting."""
    reached = max((max(w) for w in ways if w), default=0)
    nodes_used = max((i for i, w in enumerate(ways) if reached in w), default=0)
    if reached >= len(names):
        return (
            f"the {len(names)} kernels end before the graph's {len(nodes)} XNodes do "
            "(they fit no alignment with XNNPACK's known fusions)"
        )
    return (
        f"kernel {reached + 1} of {len(names)} ({names[reached]!r}) fits no XNode after the "
        f"first {nodes_used} of {len(nodes)}; the kernel sequence does not match the serialized graph"
    )
