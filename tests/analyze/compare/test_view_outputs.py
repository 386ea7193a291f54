"""A delegate output that is an op's value before a trailing view (ExecuTorch keeps such views as
`et_view` instructions in a dynamic-shape program) is compared in the op's shape: when the shapes
differ only by size-1 dimensions, or when the op only reshapes; never otherwise."""

from __future__ import annotations

import torch

from stages.analyze.compare.gap.compare import output_pairs, pair_status, reshapes_only
from stages.analyze.link.view_shapes import same_but_unit_dims


def test_unit_dimensions_aside_the_shapes_are_one_view() -> None:
    assert same_but_unit_dims((4, 5, 16), (1, 4, 5, 16))
    assert not same_but_unit_dims((4, 16, 5), (1, 4, 5, 16))


def test_a_value_before_a_unit_view_is_compared_in_the_ops_shape() -> None:
    runtime, reference = torch.randn(4, 5, 16), torch.randn(1, 4, 5, 16)
    pairs, status = output_pairs([torch.randn(1, 2, 5, 8), runtime], reference)
    assert status == "ok" and pairs[0][1].shape == reference.shape
    assert torch.equal(pairs[0][1].flatten(), runtime.flatten())


def test_a_merged_shape_only_when_the_op_reshapes() -> None:
    runtime, reference = torch.randn(1, 5, 4, 8), torch.randn(1, 5, 32)
    pairs, _ = output_pairs([runtime], reference, reshaped=True)
    assert pairs[0][1].shape == (1, 5, 32)
    (_, kept, ref), *_ = output_pairs([runtime], reference)[0]
    assert kept.shape == (1, 5, 4, 8) and pair_status(kept, ref) == "shape_mismatch"


def test_reshape_ops_are_recognised_by_their_target() -> None:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    view = graph.call_function(torch.ops.aten.view.default, (x, [4]))
    permute = graph.call_function(torch.ops.aten.permute.default, (x, [1, 0]))
    assert reshapes_only(view) and not reshapes_only(permute) and not reshapes_only(x)
