"""Which XNNPACK kernel computes each op, and the ops it computes together: an op the taps
un-fused is named (issue 44: tapping un-fused a BatchNorm while `fusion_changed_ops` named no op,
as the BatchNorm's new depthwise node carries no debug handle)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stages.lower.executorch.fusion_groups import GraphNode, fusion_groups, kernels_by_op

NO_HANDLE = 65535  # what ExecuTorch's XNNPACK serializer writes for a node of no op
HANDLES = {"conv2d": 1, "batch_norm": 2, "relu": 3, "conv2d_1": 4}
PRODUCERS = {"batch_norm": ["conv2d"], "relu": ["batch_norm"], "conv2d_1": ["relu"]}
ORDER = ["conv2d", "batch_norm", "relu", "conv2d_1"]


def _groups(nodes: list[GraphNode]) -> dict[str, list[str]]:
    return fusion_groups(kernels_by_op(nodes, HANDLES, PRODUCERS, ORDER))


def test_a_batchnorm_and_relu_folded_into_the_conv_are_its_group() -> None:
    shipped = [
        GraphNode("XNNStaticTranspose", NO_HANDLE, (0,), (1,)),
        GraphNode("XNNConv2d", 1, (1,), (2,)),
        GraphNode("XNNConv2d", 4, (2,), (3,)),
        GraphNode("XNNStaticTranspose", NO_HANDLE, (3,), (4,)),
    ]
    groups = _groups(shipped)
    assert groups["conv2d"] == ["batch_norm", "conv2d", "relu"]
    assert groups["conv2d_1"] == ["conv2d_1"]


def test_a_batchnorm_in_a_node_of_no_handle_after_a_tapped_conv_is_its_own_group() -> None:
    tapped = [
        GraphNode("XNNStaticTranspose", NO_HANDLE, (0,), (1,)),
        GraphNode("XNNConv2d", 1, (1,), (2,)),
        GraphNode("XNNStaticTranspose", NO_HANDLE, (2,), (5,)),  # the tap handed out as NCHW
        GraphNode("XNNDepthwiseConv2d", NO_HANDLE, (2,), (6,)),  # the BatchNorm, ReLU fused
        GraphNode("XNNConv2d", 4, (6,), (3,)),
        GraphNode("XNNStaticTranspose", NO_HANDLE, (3,), (4,)),
    ]
    groups = _groups(tapped)
    assert groups["conv2d"] == ["conv2d"]
    assert groups["batch_norm"] == groups["relu"] == ["batch_norm", "relu"]


def test_an_op_of_no_kernel_and_no_producer_is_in_no_group() -> None:
    nodes = [GraphNode("XNNConv2d", 4, (0,), (1,))]
    kernels = kernels_by_op(nodes, {"relu": 3, "conv2d_1": 4}, {}, ["relu", "conv2d_1"])
    assert kernels == {"conv2d_1": 0}


@pytest.mark.executorch
@pytest.mark.timeout(300)
def test_taps_that_unfuse_an_fp32_batchnorm_name_the_ops(tmp_path: Path) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from tests.helpers.tapped_blocks import tapped_block

    manifest, _, _ = tapped_block("conv_bn_relu", "fp32", tmp_path)
    check = manifest["instrumentation"]
    assert check["changed_what_ran"]  # a depthwise node for the BatchNorm: XNNPACK's own count
    assert {"conv2d", "batch_norm"} <= set(check["fusion_changed_ops"])
    change = check["fusion_changes"]["batch_norm"]
    assert "conv2d" in change["shipped"]["fused_with"]
    assert "conv2d" not in change["instrumented"]["fused_with"]
