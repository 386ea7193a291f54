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


# torchao's int4 range (int8 storage) and the int8 range of a per-token dynamic activation.
INT4_MIN, INT4_MAX = -8.0, 7.0
INT8_MIN = -128.0
_EPS = torch.finfo(torch.float32).eps


def grouped_int4(weight: torch.Tensor, group_size: int) -> torch.Tensor:
    """`weight` (out, in) through symmetric int4 in groups of `group_size` input features, as
    torchao's 8da4w stores it: scale = max |w| of the group / 7.5, codes in [-8, 7]."""
    rows, columns = weight.shape[0], weight.shape[-1]
    groups = weight.detach().float().reshape(rows, columns // group_size, group_size)
    scale = (groups.abs().amax(dim=-1, keepdim=True) / ((INT4_MAX - INT4_MIN) / 2)).clamp(min=_EPS)
    codes = torch.clamp(torch.round(groups * (1.0 / scale)), INT4_MIN, INT4_MAX)  # torchao's order
    return (codes * scale).reshape(weight.shape).to(weight.dtype)


def per_token_int8(value: torch.Tensor) -> torch.Tensor:
    """`value` through asymmetric int8 with one scale and zero point per token (last dimension),
    chosen at run time from the token's range (which always includes 0), as torchao's dynamic
    activation quantization does."""
    x = value.float()
    low = x.amin(dim=-1, keepdim=True).clamp(max=0.0)
    high = x.amax(dim=-1, keepdim=True).clamp(min=0.0)
    scale = ((high - low) / (INT8_MAX - INT8_MIN)).clamp(min=_EPS)
    zero = torch.clamp(INT8_MIN - torch.round(low / scale), INT8_MIN, INT8_MAX)
    codes = torch.clamp(torch.round(x * (1.0 / scale)) + zero, INT8_MIN, INT8_MAX)
    return ((codes - zero) * scale).to(value.dtype)
