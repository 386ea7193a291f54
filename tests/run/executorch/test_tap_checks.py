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


def _sketched(eager: torch.Tensor, source: str, ops: list[str]) -> dict[str, Any]:
    """A tap whose taps.json records `eager`'s sketch, as lower writes it."""
    from stages.formats.executorch.tap_sketch import sketch

    spread = [[float(eager.min()), float(eager.max())]]
    return _tap(
        source=source,
        ops=ops,
        shape=list(eager.shape),
        eager_ranges=spread,
        eager_sketches=[sketch(eager, source)],
    )


def test_another_taps_value_is_refused_naming_it_and_an_unmatched_one_is_kept() -> None:
    torch.manual_seed(0)
    mine, theirs = torch.randn(1, 4, 16, 16), torch.randn(1, 16, 16, 4)
    tap = _sketched(mine, "relu", ["conv2d", "relu"])
    other = _sketched(theirs, "view_8", ["view_8"])
    taps = [tap, other]
    # the runtime's own value: int8/fp16 rounding agrees far above the bound
    rounded = mine + 0.01 * torch.randn_like(mine)
    assert refusal(rounded, tap, 0, 20.0, taps) is None
    # another tap's value viewed in this shape (GPT-2's view_8 under view_6): same dtype and
    # spread, and it is that tap's eager value: refused, naming whose it is
    reason = refusal(theirs.reshape(1, 4, 16, 16), tap, 0, 20.0, taps)
    assert reason is not None and "it is view_8's value" in reason, reason
    # a value that is no tap's (a kernel computing the op wrongly): kept, so it is compared
    wrong = mine.transpose(2, 3).contiguous()
    assert refusal(wrong, tap, 0, 20.0, taps) is None
    assert refusal(torch.full_like(mine, float("nan")), tap, 0, 20.0, taps) is None
    # taps.json of an earlier version (no sketch): judged by shape, dtype and spread alone
    old = _tap(shape=[1, 4, 16, 16], eager_ranges=tap["eager_ranges"])
    assert refusal(theirs.reshape(1, 4, 16, 16), old, 0, 20.0, [old]) is None


def test_the_sketch_estimates_the_whole_tensors_snr() -> None:
    from stages.formats.executorch.tap_sketch import agreement_db, sketch

    torch.manual_seed(1)
    for size, noise in [((1, 8, 32, 32), 0.1), ((1, 197, 192), 0.01), ((64,), 0.3)]:
        eager = torch.randn(size)
        got = eager + noise * torch.randn(size)
        exact = 10 * torch.log10(eager.pow(2).sum() / (eager - got).pow(2).sum()).item()
        estimated = agreement_db(sketch(eager, "t"), sketch(got, "t"))
        assert abs(estimated - exact) < 2.0, (size, exact, estimated)
