"""Each tapped value is proven to be its tap's: on the blocks people ship (conv + BatchNorm +
activation, squeeze-excitation, hardswish, chunk/getitem/cat/shuffle) at int8 and fp16 on
ExecuTorch's XNNPACK, every runtime value agrees with the instrumented program run eagerly (the
whole tensors compared here, the sketches in the product) by the precision's bound, and another
tap's value filed under a tap is refused, naming whose it is."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.helpers.block_patterns import PATTERNS

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(600)]


def _snr_db(reference: torch.Tensor, other: torch.Tensor) -> float:
    reference, other = reference.detach().double(), other.detach().double()
    noise = float((reference - other).pow(2).sum())
    return float("inf") if noise == 0 else 10 * torch.log10(reference.pow(2).sum() / noise).item()


def _tapped(name: str, precision: str, tmp_path: Path) -> tuple[dict[str, Any], list[Any], Any]:
    """taps.json, the runtime's outputs and the eager instrumented program's outputs."""
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from tests.helpers.tapped_blocks import tapped_block

    return tapped_block(name, precision, tmp_path)


def _same_values(one: torch.Tensor, other: torch.Tensor) -> bool:
    """Two eager values holding the same numbers in the same order (a view of one another)."""
    return one.numel() == other.numel() and _snr_db(one.reshape(-1), other.reshape(-1)) > 40


CASES = [(name, "int8") for name in sorted(PATTERNS)] + [("squeeze_excite", "fp16")]


@pytest.mark.parametrize(("name", "precision"), CASES)
def test_every_tap_is_its_eager_value_and_another_tensors_is_refused(
    name: str, precision: str, tmp_path: Path
) -> None:
    from stages.run.executorch.tap_checks import dequantized, refusal

    manifest, runtime, eager = _tapped(name, precision, tmp_path)
    required = float(manifest["agreement_db"])
    taps = manifest["taps"]
    assert taps
    for tap in taps:
        value = runtime[tap["output_index"]]
        whole = _snr_db(dequantized(eager[tap["source"]], tap), dequantized(value, tap))
        assert whole >= required, (tap["ops"], whole)  # the bound holds on true taps
        assert refusal(value, tap, 0, required, taps) is None, tap["ops"]
    # Another tap's value filed under this one (its own shape kept, as a view of it would be):
    # refused, naming whose it is. A value that is no tap's is kept (a kernel's own error).
    swapped = 0
    for tap in taps:
        for other in taps:
            value = runtime[other["output_index"]]
            if other is tap or value.numel() != math.prod(tap["shape"]):
                continue
            if str(value.dtype) != tap["dtype"]:
                continue
            if (
                _snr_db(
                    eager[tap["source"]].double().reshape(-1),
                    eager[other["source"]].double().reshape(-1),
                )
                > 10
            ):
                continue  # the two taps hold nearly one value (a view): nothing to tell apart
            reason = refusal(value.reshape(tap["shape"]), tap, 0, required, taps)
            # named: the swapped tap, or one holding the same values (a view of it)
            same = [t for t in taps if _same_values(eager[t["source"]], eager[other["source"]])]
            assert reason is not None and any(
                f"it is {', '.join(t['ops'])}'s value" in reason for t in same
            ), reason
            swapped += 1
        kept = refusal(runtime[tap["output_index"]].flip(-1), tap, 0, required, taps)
        assert kept is None or "'s value" in kept, kept  # no tap's: kept for the comparison
    assert swapped or name == "conv_bn_relu", "no two taps of one size to swap"
