"""A tapped value is refused when its shape, dtype or spread cannot belong to the op it is filed
under; a value that can is accepted, NaN included (a finding, not a misfiling)."""

from __future__ import annotations

from typing import Any

import torch

from stages.run.executorch.tap_checks import SPREAD_FACTOR, dequantized, refusal


def _tap(**changes: Any) -> dict[str, Any]:
    tap = {
        "source": "relu",
        "ops": ["conv2d", "relu"],
        "shape": [1, 4],
        "dtype": "torch.float32",
        "eager_ranges": [[0.0, 2.0]],
    }
    return tap | changes


def test_a_value_like_the_eager_one_is_accepted() -> None:
    assert refusal(torch.tensor([[0.0, 0.5, 1.9, 2.1]]), _tap(), 0) is None
    scaled = torch.tensor([[0.0, 0.75, 2.85, 3.15]])  # a scale-1.5 fault: a finding
    assert refusal(scaled, _tap(), 0) is None
    assert refusal(torch.full((1, 4), float("nan")), _tap(), 0) is None


def test_shape_dtype_and_spread_misfits_are_refused_with_the_reason() -> None:
    assert "shape [4] is not conv2d, relu's [1, 4]" in str(refusal(torch.zeros(4), _tap(), 0))
    half = torch.zeros(1, 4, dtype=torch.float16)
    assert "dtype torch.float16" in str(refusal(half, _tap(), 0))
    zeros = refusal(torch.zeros(1, 4), _tap(), 0)  # ExecuTorch's dequantize taps at int8: 0.0
    assert zeros is not None and "span 0" in zeros
    narrow = torch.tensor([[0.0, 0.1, 0.15, 0.19]])  # the weights' range filed under conv2d
    assert "more than 4x apart" in str(refusal(narrow, _tap(), 0))
    wide = torch.tensor([[0.0, 0.0, 0.0, 2.0 * SPREAD_FACTOR + 1]])
    assert refusal(wide, _tap(), 0) is not None


def test_an_int8_tap_is_judged_and_logged_dequantized() -> None:
    tap = _tap(dtype="torch.int8", scale=0.5, zero_point=-128)
    value = torch.tensor([[-128, -127, -125, -124]], dtype=torch.int8)
    assert dequantized(value, tap).tolist() == [[0.0, 0.5, 1.5, 2.0]]
    assert refusal(value, tap, 0) is None
    assert refusal(torch.full((1, 4), -128, dtype=torch.int8), tap, 0) is not None


def _sketched(eager: torch.Tensor, **changes: Any) -> dict[str, Any]:
    """A tap whose taps.json records `eager`'s sketch, as lower writes it."""
    from stages.formats.executorch.tap_sketch import sketch

    shape = list(eager.shape)
    spread = [[float(eager.min()), float(eager.max())]]
    return _tap(shape=shape, eager_ranges=spread, eager_sketches=[sketch(eager, "relu")]) | changes


def test_another_tensor_with_the_same_shape_and_spread_is_refused_by_its_sketch() -> None:
    torch.manual_seed(0)
    eager = torch.randn(1, 4, 16, 16)
    tap = _sketched(eager)
    # the runtime's own value: int8/fp16 rounding agrees far above the bound
    rounded = eager + 0.01 * torch.randn_like(eager)
    assert refusal(rounded, tap, 0, 20.0) is None
    # another op's values viewed in this shape (a reshape of a transposed neighbour): same
    # shape, same dtype, same spread, so only the comparison with the eager value tells
    other = eager.transpose(2, 3).contiguous()
    reason = refusal(other, tap, 0, 20.0)
    assert reason is not None and "another tensor's value" in reason and "conv2d, relu" in reason
    # a value the fault made different (scale 1.5) is a finding the eager program shares: the
    # instrumented program carries the fault, so its value is what the runtime returns
    assert refusal(torch.full_like(eager, float("nan")), tap, 0, 20.0) is None
    # taps.json of an earlier version (no sketch): judged by shape, dtype and spread alone
    assert (
        refusal(other, _tap(shape=[1, 4, 16, 16], eager_ranges=tap["eager_ranges"]), 0, 20.0)
        is None
    )


def test_the_sketch_estimates_the_whole_tensors_snr() -> None:
    from stages.formats.executorch.tap_sketch import agreement_db, sketch

    torch.manual_seed(1)
    for size, noise in [((1, 8, 32, 32), 0.1), ((1, 197, 192), 0.01), ((64,), 0.3)]:
        eager = torch.randn(size)
        got = eager + noise * torch.randn(size)
        exact = 10 * torch.log10(eager.pow(2).sum() / (eager - got).pow(2).sum()).item()
        estimated = agreement_db(sketch(eager, "t"), sketch(got, "t"))
        assert abs(estimated - exact) < 2.0, (size, exact, estimated)
