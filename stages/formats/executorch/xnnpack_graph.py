"""ExecuTorch's serialized XNNPACK graph (a delegate's processed bytes), read node by node.

ExecuTorch's XNNPACK `preprocess` writes an `XNNGraph` flatbuffer (schema `fb_xnnpack`, file
identifier `XN00`/`XN01`), usually behind a 30-byte header: 4 zero bytes, magic `XH00`, header
length (u16), flatbuffer offset and size (u32 each), constant data offset (u32) and size (u64),
little-endian. Each `XNode` holds one operator of the `XNodeUnion` and `debug_handle`, the
handle of the edge-program node it came from. Only the fields the link recovery needs are read:
node kinds in order, their handles, value ids in and out, and whether an activation range was
folded into them (`output_min_max`). The format is recognised by content; every offset is
checked (`checked_flatbuffer`) and bad bytes raise `XnnpackGraphError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from stages.safe_io.checked_flatbuffer import CheckedBuffer, CheckedTable

HEADER_MAGIC = b"XH00"
FILE_IDENTIFIERS = (b"XN00", b"XN01")
HEADER_LENGTH = 30
MAX_NODES = 1_000_000
# Handles that name no node of the model: unset, and the default ExecuTorch's XNNPACK
# `preprocess` gives nodes its own passes added (`DEFAULT_DEBUG_HANDLE`, e.g. layout transposes).
NO_ORIGIN_HANDLES = frozenset({0, 65535})

# XNodeUnion members in schema order (union type 1 is the first).
XNODE_KINDS = (
    "XNNAdd",
    "XNNFullyConnected",
    "XNNSoftmax",
    "XNNSigmoid",
    "XNNStaticTranspose",
    "XNNClamp",
    "XNNConv2d",
    "XNNDiv",
    "XNNStaticResizeBilinear2D",
    "XNNStaticConstantPad",
    "XNNAvgPooling2d",
    "XNNMinimum",
    "XNNDepthwiseConv2d",
    "XNNMaxPooling2d",
    "XNNMultiply",
    "XNNSubtract",
    "XNNFloor",
    "XNNConvert",
    "XNNGlobalAvgPooling2d",
    "XNNStaticReshape",
    "XNNArgMaxPooling2d",
    "XNNSquareRoot",
    "XNNCeiling",
    "XNNHardswish",
    "XNNLeakyReLU",
    "XNNMaximum",
    "XNNNegate",
    "XNNSquare",
    "XNNELU",
    "XNNAbs",
    "XNNPReLU",
    "XNNConcatenate2",
    "XNNConcatenate3",
    "XNNConcatenate4",
    "XNNStaticSlice",
    "XNNScaledDotProductAttention",
    "XNNBatchMatrixMultiply",
    "XNNConcatenate5",
    "XNNConvTranspose2d",
    "XNNReciprocalSquareRoot",
    "XNNLog",
    "XNNGelu",
    "XNNTanh",
    "XNNExp",
    "XNNSin",
    "XNNCopy",
    "XNNCos",
)

_NODE_1X1 = ((0,), (1,))
_NODE_2X1 = ((0, 1), (2,))
_CONV = ((15, 16, 17), (18,))
_POOL = ((10,), (11,))
_CAT = ((1, 2, 3, 4, 7), (5,))
# Per table layout: (input id slots, output id slots).
_VALUE_SLOTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "XNNFullyConnected": ((0, 1, 2), (3,)),
    "XNNStaticTranspose": ((2,), (3,)),
    "XNNStaticResizeBilinear2D": ((2,), (3,)),
    "XNNStaticConstantPad": ((3,), (4,)),
    "XNNStaticReshape": ((2,), (3,)),
    "XNNStaticSlice": ((3,), (4,)),
    "XNNScaledDotProductAttention": ((0, 1, 2, 3, 4), (5,)),
    "XNNArgMaxPooling2d": ((6,), (7, 8)),
    "XNNLeakyReLU": ((1,), (2,)),
    "XNNELU": ((1,), (2,)),
    **dict.fromkeys(("XNNConv2d", "XNNDepthwiseConv2d", "XNNConvTranspose2d"), _CONV),
    **dict.fromkeys(("XNNAvgPooling2d", "XNNMaxPooling2d"), _POOL),
    **dict.fromkeys(
        ("XNNConcatenate2", "XNNConcatenate3", "XNNConcatenate4", "XNNConcatenate5"), _CAT
    ),
    **dict.fromkeys(
        (
            "XNNAdd",
            "XNNDiv",
            "XNNMinimum",
            "XNNMaximum",
            "XNNMultiply",
            "XNNSubtract",
            "XNNPReLU",
            "XNNBatchMatrixMultiply",
        ),
        _NODE_2X1,
    ),
}


class XnnpackGraphError(Exception):
    """Bytes that are not a well-formed serialized XNNPACK graph; names where they came from."""


@dataclass(frozen=True)
class XNode:
    """One serialized XNNPACK node: its operator kind, origin handle and value ids."""

    position: int
    kind: str
    debug_handle: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    has_output_range: bool


@dataclass(frozen=True)
class XnnpackGraph:
    """A delegate's XNNPACK graph: schema version, nodes in serialized order, external ids."""

    version: str
    nodes: tuple[XNode, ...]
    input_ids: tuple[int, ...]
    output_ids: tuple[int, ...]


def is_xnnpack_payload(data: bytes) -> bool:
    """True for ExecuTorch's XNNPACK processed bytes (header magic or flatbuffer identifier)."""
    return len(data) >= 8 and (data[4:8] == HEADER_MAGIC or data[4:8] in FILE_IDENTIFIERS)


def _flatbuffer_range(data: bytes, where: str) -> tuple[int, int]:
    """(offset, size) of the XNNGraph flatbuffer inside the processed bytes."""
    if data[4:8] in FILE_IDENTIFIERS:
        return 0, len(data)
    if len(data) < HEADER_LENGTH:
        raise XnnpackGraphError(f"{where}: XNNPACK header truncated ({len(data)} bytes)")
    length, offset, size = struct.unpack_from("<HII", data, 8)
    if length < HEADER_LENGTH or offset < length or size < 8 or offset + size > len(data):
        raise XnnpackGraphError(
            f"{where}: XNNPACK header names flatbuffer bytes {offset}..{offset + size} "
            f"(header length {length}) outside the {len(data)}-byte payload"
        )
    return offset, size


def read_xnnpack_graph(data: bytes, where: str) -> XnnpackGraph:
    """The nodes of ExecuTorch's XNNPACK processed bytes; XnnpackGraphError on anything else."""
    if not is_xnnpack_payload(data):
        raise XnnpackGraphError(
            f"{where}: not ExecuTorch's XNNPACK processed bytes (no XH00 header or XN00/XN01 "
            "flatbuffer identifier)"
        )
    offset, size = _flatbuffer_range(data, where)
    body = data[offset : offset + size]
    if body[4:8] not in FILE_IDENTIFIERS:
        raise XnnpackGraphError(
            f"{where}: flatbuffer identifier {body[4:8]!r} is not one of {FILE_IDENTIFIERS}"
        )
    buffer = CheckedBuffer(body, where, XnnpackGraphError)
    graph = buffer.root()
    nodes = tuple(_node(i, t, where) for i, t in enumerate(graph.tables(1, MAX_NODES)))
    return XnnpackGraph(graph.string(0), nodes, graph.uints(4), graph.uints(5))


def _node(position: int, table: CheckedTable, where: str) -> XNode:
    kind_index = table.ubyte(0)
    if not 1 <= kind_index <= len(XNODE_KINDS):
        raise XnnpackGraphError(
            f"{where}: XNode {position} has operator type {kind_index}, which schema "
            f"fb_xnnpack (ExecuTorch 1.5) does not define"
        )
    kind = XNODE_KINDS[kind_index - 1]
    body = table.sub(1)
    if body is None:
        raise XnnpackGraphError(f"{where}: XNode {position} ({kind}) has no operator table")
    inputs, outputs = _VALUE_SLOTS.get(kind, _NODE_1X1)
    return XNode(
        position=position,
        kind=kind,
        debug_handle=table.uint(2),
        inputs=tuple(body.uint(s) for s in inputs),
        outputs=tuple(body.uint(s) for s in outputs),
        has_output_range=table.sub(3) is not None,
    )
