"""A runtime op with more outputs than its reference op stands in for it: ExecuTorch runs
aten.layer_norm as native_layer_norm (value, mean, rstd). Without this, the ops after a
portable layer_norm were re-run on the reference's value and judged on the error accumulated
before them against their local expected error: the clean 2-block ViT at int8 on ExecuTorch's
XNNPACK failed at its head (observed 20.6 dB against 36.5 dB expected; 31.5 against 34.6 with
the stand-in, a pass)."""

from __future__ import annotations

import torch

from stages.analyze.compare.stand_ins import last_stand_in


def test_the_output_of_the_references_shape_stands_in() -> None:
    ref = torch.randn(1, 17, 32)
    logged = [ref + 0.01, torch.randn(1, 17, 1), torch.randn(1, 17, 1)]
    found = last_stand_in([logged], ref)
    assert isinstance(found, torch.Tensor) and torch.equal(found, logged[0])


def test_no_stand_in_when_the_match_is_not_certain() -> None:
    ref = torch.randn(4, 8)
    assert last_stand_in([[torch.randn(4, 8), torch.randn(4, 8)]], ref) is None  # two fit
    assert last_stand_in([[torch.randn(4, 8).to(torch.int8)]], ref) is None  # another kind
    assert last_stand_in([[torch.randn(4, 1)]], ref) is None  # no shape fits


def test_one_runtime_value_stands_in_for_the_one_output_of_its_shape() -> None:
    """A delegate's BatchNorm logs its value, aten's op also returns the batch statistics (empty
    in eval): the value stands in for output 0, the others stay the reference's. Without this,
    the ops reading it (MobileNetV2's pad) re-ran on the reference BatchNorm and were judged on
    the int8 error before them against a float budget (a false FAIL)."""
    ref = (torch.randn(1, 8, 4, 4), torch.empty(0), torch.empty(0))
    logged = ref[0] + 0.01
    found = last_stand_in([logged], ref)
    assert isinstance(found, tuple) and torch.equal(found[0], logged)
    assert found[1] is ref[1] and found[2] is ref[2]
    two_fit = (torch.randn(4, 8), torch.randn(4, 8))
    assert last_stand_in([torch.randn(4, 8)], two_fit) is None
