"""A tapped value's sketch, as taps.json records it: enough of the eager value to prove, at run
time, that the runtime's value filed under a tap is that value, without storing the tensor.

A count sketch (each element added, with a random sign, into one of `SKETCH_SIZE` buckets, both
drawn from a generator seeded by the tap's name) is linear, so sketch(a) - sketch(b) is
sketch(a - b), and its squared norm estimates the squared norm of the sketched tensor without
bias (relative spread about sqrt(2 / SKETCH_SIZE), under 1 dB at 64 buckets). The SNR of the
runtime's sketch against the eager one therefore estimates the SNR of the two whole tensors.
Non-finite elements count as 0 on both sides: NaN is a numeric finding, not a misfiling.
"""

from __future__ import annotations

import hashlib
import math

import torch

SKETCH_SIZE = 64
# The runtime's value must agree with the instrumented program run eagerly by at least this much
# (dB) to count as the tapped op's value. Measured agreement of true taps (conv + BatchNorm +
# activation, squeeze-excitation, chunk/cat/shuffle blocks on ExecuTorch's XNNPACK): >= 51 dB at
# int8, >= 58 dB at fp16, >= 130 dB at fp32 (benchmarks/RESULTS.md); a value of another op agrees
# by about 10 dB at most (a BatchNorm's output under its conv) and usually by 0 dB or less.
AGREEMENT_DB = {"fp32": 40.0, "fp16": 25.0, "int8": 20.0}
DEFAULT_AGREEMENT_DB = 20.0


def _seed(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") >> 1


def sketch(value: torch.Tensor, key: str) -> list[float]:
    """The count sketch of `value` (as float64) under the buckets and signs `key` draws."""
    flat = value.detach().reshape(-1).to(torch.float64)
    flat = torch.where(torch.isfinite(flat), flat, torch.zeros((), dtype=torch.float64))
    generator = torch.Generator().manual_seed(_seed(key))
    buckets = torch.randint(0, SKETCH_SIZE, (flat.numel(),), generator=generator)
    signs = torch.randint(0, 2, (flat.numel(),), generator=generator).to(torch.float64) * 2 - 1
    out = torch.zeros(SKETCH_SIZE, dtype=torch.float64)
    out.index_add_(0, buckets, flat * signs)
    return [float(v) for v in out]


def agreement_db(eager: list[float], runtime: list[float]) -> float:
    """Estimated SNR (dB) of the runtime's value against the eager one: +inf when they agree
    exactly, -inf when the eager value is zero and the runtime's is not."""
    signal = math.fsum(e * e for e in eager)
    noise = math.fsum((e - r) * (e - r) for e, r in zip(eager, runtime, strict=True))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)
