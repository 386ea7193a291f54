"""The certain-only alignment of XNNPACK kernel names to serialized XNodes, case by case."""

from __future__ import annotations

from stages.analyze.link.xnnpack.alignment import align, kernel_family
from stages.formats.executorch.xnnpack_graph import XNode


def _node(position: int, kind: str, handle: int, inputs=(0,), outputs=(1,)) -> XNode:  # type: ignore[no-untyped-def]
    return XNode(position, kind, handle, tuple(inputs), tuple(outputs), False)


def test_kernel_family_drops_layout_variant_and_counter() -> None:
    assert kernel_family("Fully Connected (NC, F32) GEMM #12") == "fullyconnected"
    assert kernel_family("Static Reshape (NC) #1") == "staticreshape"
    assert kernel_family("Softmax (NC, F32) #1") == "softmax"


def test_one_kernel_per_node_places_every_kernel() -> None:
    nodes = [_node(0, "XNNFullyConnected", 1), _node(1, "XNNGelu", 2), _node(2, "XNNAdd", 3)]
    placements, runs_none = align(nodes, ["Fully Connected #1", "GELU (NC) #1", "Add (ND) #1"])
    assert [p.nodes for p in placements] == [(0,), (1,), (2,)]
    assert runs_none == [False, False, False]


def test_a_clamp_xnnpack_fused_runs_no_kernel_of_its_own() -> None:
    nodes = [
        _node(0, "XNNConv2d", 1, inputs=(0,), outputs=(1,)),
        _node(1, "XNNClamp", 2, inputs=(1,), outputs=(2,)),
    ]
    placements, runs_none = align(nodes, ["Convolution (NHWC, F32) IGEMM #1"])
    assert placements[0].nodes == (0,)
    assert runs_none == [False, True]


def test_interchangeable_nodes_leave_the_kernel_ambiguous() -> None:
    # Two elidable reshapes and one reshape kernel: either could have run it.
    nodes = [
        _node(0, "XNNStaticReshape", 1),
        _node(1, "XNNStaticReshape", 2),
        _node(2, "XNNBatchMatrixMultiply", 3),
    ]
    placements, _ = align(nodes, ["Static Reshape (NC) #1", "Batch Matrix Multiply #1"])
    assert placements[0].nodes == (0, 1)  # the caller links it only if both share an op
    assert placements[1].nodes == (2,)


def test_a_sequence_that_fits_no_alignment_says_where_it_stopped() -> None:
    nodes = [_node(0, "XNNFullyConnected", 1), _node(1, "XNNSoftmax", 2)]
    placements, _ = align(nodes, ["Softmax (NC, F32) #1", "Fully Connected #1"])
    assert all(p.nodes == () for p in placements)
    assert "kernel 1 of 2 ('Softmax (NC, F32) #1') fits no XNode" in placements[0].reason


def test_unknown_node_kinds_place_nothing() -> None:
    nodes = [XNode(0, "XNNFutureOp", 1, (0,), (1,), False)]
    placements, _ = align(nodes, ["Future (NC) #1"])
    assert placements[0].nodes == () and "XNNFutureOp" in placements[0].reason


def test_the_type_agreement_check_catches_a_kernel_on_the_wrong_op() -> None:
    from tests.helpers.xnnpack_kernel_types import disagreements

    def event(identifier: str, ops: list[str]) -> dict[str, object]:
        return {
            "delegate_debug_identifier": identifier,
            "op_types": ops,
            "link_source": "recovered",
            "event_block_name": "Execute",
            "instruction_id": 1,
        }

    right = [event("Fully Connected (NC, F32) GEMM #1", ["aten.linear.default"])]
    wrong = [event("Fully Connected (NC, F32) GEMM #1", ["aten.softmax.int"])]
    layout_off = [event("Transpose (ND, X32) #1", ["aten.gelu.default"])]
    assert disagreements(right) == []
    assert disagreements(wrong) == ["Fully Connected (NC, F32) GEMM #1 -> ['softmax']"]
    assert disagreements(layout_off) != []


def test_a_binary_node_with_a_folded_activation_runs_a_clamp_after_it() -> None:
    # ExecuTorch 1.5.1 folds a relu into a Multiply XNode's output range; XNNPACK then runs the
    # multiply and a Clamp operator (seen on a fault op before a relu).
    clamped = XNode(1, "XNNMultiply", 2, (1,), (2,), True)
    nodes = [_node(0, "XNNFullyConnected", 1), clamped, _node(2, "XNNAdd", 3)]
    names = ["Fully Connected #1", "Multiply (ND) #1", "Clamp (NC) #1", "Add (ND) #1"]
    placements, _ = align(nodes, names)
    assert [p.nodes for p in placements] == [(0,), (1,), (1,), (2,)]
    # without the folded range the same kernels fit no alignment
    plain = [_node(0, "XNNFullyConnected", 1), _node(1, "XNNMultiply", 2), _node(2, "XNNAdd", 3)]
    assert all(not p.nodes for p in align(plain, names)[0])
