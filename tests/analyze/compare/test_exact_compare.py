"""The tie rule for index outputs (issue 12.3): a near-tie flip passes, a wrong index fails."""

from __future__ import annotations

import torch

from stages.analyze.compare.exact_compare import (
    count_index_mismatches,
    count_mismatches,
    index_output,
    tie_tolerance,
)
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.compare.verdict import row_diverged


def _node(fn, *args):  # type: ignore[no-untyped-def]
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    return graph.call_function(fn, (x, *args))


def _row(values: dict[str, float], comparison: str) -> GapRow:
    return GapRow(
        0, 0, 0, (1,), [], "", False, "ok", accumulated=values, local=values, comparison=comparison
    )


def test_index_outputs_are_found_with_their_dim() -> None:
    topk = index_output(_node(torch.ops.aten.topk.default, 3))
    assert topk is not None and (topk.output_index, topk.dim) == (1, -1)
    argmax = index_output(_node(torch.ops.aten.argmax.default, 1))
    assert argmax is not None and (argmax.output_index, argmax.dim, argmax.keepdim) == (0, 1, False)
    flat = index_output(_node(torch.ops.aten.argmax.default))
    assert flat is not None and flat.dim is None
    assert index_output(_node(torch.ops.aten.relu.default)) is None


def test_a_near_tie_flip_at_fp16_is_excused_and_a_wrong_index_is_not() -> None:
    x = torch.tensor([[1.0, 3.0, 3.0004, -2.0]])  # 3.0 and 3.0004 tie at fp16
    reference = x.topk(2).indices  # [2, 1]
    spec = index_output(_node(torch.ops.aten.topk.default, 2))
    assert spec is not None
    flipped = torch.tensor([[1, 2]])
    tie = count_index_mismatches([flipped], [reference], [x], spec, tie_tolerance("fp16"))
    assert tie == {"mismatches": 2.0, "mismatch_fraction": 1.0, "tie_flips": 2.0}
    assert not row_diverged(_row(tie, "index"), "snr", 30.0, True)

    wrong = torch.tensor([[2, 0]])  # 1.0 is not within fp16 tolerance of 3.0
    error = count_index_mismatches([wrong], [reference], [x], spec, tie_tolerance("fp16"))
    assert error["mismatches"] == 1.0 and error["tie_flips"] == 0.0
    assert row_diverged(_row(error, "index"), "snr", 30.0, True)

    # At fp32 the same near-tie is a real difference: only equal values tie.
    strict = count_index_mismatches([flipped], [reference], [x], spec, tie_tolerance("fp32"))
    assert strict["tie_flips"] == 0.0


def test_argmax_without_keepdim_gathers_along_its_dim() -> None:
    x = torch.tensor([[0.0, 5.0, 5.0], [1.0, 0.0, 9.0]])
    spec = index_output(_node(torch.ops.aten.argmax.default, 1))
    assert spec is not None
    got = count_index_mismatches(
        [torch.tensor([2, 2])], [torch.tensor([1, 2])], [x], spec, tie_tolerance("fp32")
    )
    assert got["tie_flips"] == 1.0  # 5.0 == 5.0: an exact tie, excused even at fp32


def test_integer_and_bool_outputs_are_counted_exactly() -> None:
    got = count_mismatches(
        [torch.tensor([1, 2, 3]), torch.tensor([True])],
        [torch.tensor([1, 0, 3]), torch.tensor([True])],
    )
    assert got == {"mismatches": 1.0, "mismatch_fraction": 0.25}
    assert row_diverged(_row(got, "exact"), "snr", 60.0, True)
    assert not row_diverged(
        _row(count_mismatches([torch.ones(2)], [torch.ones(2)]), "exact"), "snr", 60.0, True
    )
