"""What running at a lower precision does to tensors: fp16 rounding, symmetric int8 quantization.

AOT, weights are stored at the precision (`stored_weight`); at run time they are widened back
(`widened_weight`) and every kernel's inputs and output are rounded (`round_to_precision`).
"""

from __future__ import annotations

from typing import Any

import torch

from stages.closed_sets import Precision

INT8_MAX = 127.0


def quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8, one scale per output channel (axis 0)."""
    flat = weight.detach().reshape(weight.shape[0], -1).abs().amax(dim=1).clamp(min=1e-12)
    scales = (flat / INT8_MAX).to(torch.float32)
    shape = [-1] + [1] * (weight.dim() - 1)
    q = torch.round(weight / scales.reshape(shape)).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scales


def int8_scale(max_abs: float | None) -> float | None:
    """The per-tensor int8 scale of a calibrated range (None when not calibrated)."""
    return (max_abs / INT8_MAX) if max_abs else None


def stored_weight(
    weight: torch.Tensor, precision: str, quantize: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A constant as the delegate stores it: int8 + per-channel scales, fp16, or unchanged."""
    if quantize:
        return quantize_per_channel(weight.float())
    if precision == Precision.fp16 and weight.is_floating_point():
        return weight.to(torch.float16), None
    return weight, None


def widened_weight(tensor: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """A stored constant back in fp32 for the torch kernels (dequantized or widened)."""
    if scales is not None:
        shape = [-1] + [1] * (tensor.dim() - 1)
        return tensor.to(torch.float32) * scales.reshape(shape)
    if tensor.dtype == torch.float16:
        return tensor.to(torch.float32)
    return tensor


def round_to_precision(value: Any, precision: str, scale: float | None) -> Any:
    """What storing a tensor at the emulated precision does to it."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value
    if precision == Precision.fp16:
        return value.to(torch.float16).to(torch.float32)
    if precision == Precision.int8 and scale:
        quantized = torch.round(value / scale).clamp(-INT8_MAX - 1, INT8_MAX) * scale
        # Masks (-inf) stay masks: NPUs keep them out of the quantized range.
        return torch.where(torch.isfinite(value), quantized, value)
    return value
