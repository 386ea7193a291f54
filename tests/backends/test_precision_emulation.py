"""The 8da4w emulation (int4 weights in groups, int8 activations per token) computes what
torchao's eager quantized linear computes, so the expected error models the scheme by its rule."""

from __future__ import annotations

import pytest
import torch

from stages.backends.precision_emulation import grouped_int4, per_token_int8


@pytest.mark.parametrize("group_size", [16, 32, 64])
def test_grouped_weights_and_per_token_inputs_equal_torchaos_linear(group_size: int) -> None:
    pytest.importorskip("torchao", reason="needs torchao: the executorch extra")
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(group_size)
    linear = torch.nn.Linear(128, 24)
    weight, bias = linear.weight.detach().clone(), linear.bias.detach().clone()
    x = torch.randn(2, 5, 128) * 3 + 0.7  # tokens of mixed sign and an offset
    config = Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4,  # type: ignore[attr-defined]
        weight_granularity=PerGroup(group_size),
    )
    quantize_(linear, config)
    with torch.no_grad():
        emulated = torch.nn.functional.linear(
            per_token_int8(x), grouped_int4(weight, group_size), bias
        )
        assert torch.equal(emulated, linear(x))
        assert not torch.equal(emulated, torch.nn.functional.linear(x, weight, bias))


def test_per_token_rounding_keeps_zero_exact_and_each_token_on_its_own_grid() -> None:
    x = torch.tensor([[0.0, 1.0, -3.0, 2.5], [0.0, 100.0, 50.0, 25.0]])
    y = per_token_int8(x)
    assert torch.equal(y[:, 0], torch.zeros(2))  # 0 is always representable
    assert (y[0] - x[0]).abs().max() <= 5.5 / 255 / 2 + 1e-6  # the small token's own step
    assert (y[1] - x[1]).abs().max() <= 100 / 255 / 2 + 1e-5


def test_grouped_int4_has_at_most_16_levels_per_group() -> None:
    torch.manual_seed(0)
    weight = torch.randn(4, 64)
    stored = grouped_int4(weight, 32)
    for row in stored.reshape(4, 2, 32).reshape(8, 32):
        assert len(torch.unique(row)) <= 16
    assert (stored - weight).abs().max() <= weight.abs().max() / 7.5 / 2 * 1.0001 + 1e-6
