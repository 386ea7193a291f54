"""Is a tapped value plausibly the value of the op it is filed under? Checked before any
comparison, so a value an instrumented program returns for another tensor is refused with a
reason, never compared (ExecuTorch's default tap misfiles values at int8: issue 34).

The tap's recorded shape and dtype must match exactly, and the spread of its finite values
(max - min, dequantized for an int8 tap) must be within a factor `SPREAD_FACTOR` of the spread
the instrumented program computes eagerly on the same input (taps.json `eager_ranges`). A
precision's rounding, and the faults this tool injects (scale 1.5, offsets), stay well inside
that factor; a weight's value range filed under an activation, or a zeroed buffer, do not. Then
a value that agrees with its own tap's eager value (its sketch in taps.json,
`stages.formats.executorch.tap_sketch`) by less than the precision's `agreement_db` but with
another tap's by that much is that tap's value, misfiled: refused, naming whose it is. One that
agrees with no tap's is kept and compared: the runtime computes the op otherwise than the eager
program, a finding (instrumentation.json `runtime_differs_from_eager`). A value with no finite element is not refused (NaN is a
numeric finding, not a misfiling).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from stages.formats.executorch.tap_sketch import agreement_db, sketch

SPREAD_FACTOR = 4.0
_TINY = 1e-12


def dequantized(value: torch.Tensor, tap: dict[str, Any]) -> torch.Tensor:
    """The tapped value as float32: an int8 tap dequantized with its quantize node's params."""
    if tap.get("scale") is None:
        return value.to(torch.float32)
    return ((value.to(torch.float32) - float(tap.get("zero_point") or 0)) * float(tap["scale"])).to(
        torch.float32
    )


def finite_range(value: torch.Tensor) -> list[float] | None:
    """[min, max] of the finite elements, None without any."""
    value = value.detach()
    finite = value[torch.isfinite(value)]
    return [float(finite.min()), float(finite.max())] if finite.numel() else None


def refusal(
    value: torch.Tensor,
    tap: dict[str, Any],
    sample: int,
    agreement: float | None = None,
    others: Sequence[dict[str, Any]] = (),
    own: float | None = None,
) -> str | None:
    """Why `value` cannot belong to the ops `tap` files it under, or None when it can.
    `agreement`: the dB by which a tap's value agrees with its own eager value (its sketch);
    `others`: the program's other taps, whose eager values a misfiled value is; `own`: that
    agreement when the caller has it (`tap_agreement_db`), else computed here."""
    ops = ", ".join(tap.get("ops", ())) or tap.get("source", "?")
    if tuple(value.shape) != tuple(tap["shape"]):
        return f"shape {list(value.shape)} is not {ops}'s {list(tap['shape'])}"
    if str(value.dtype) != str(tap["dtype"]):
        return f"dtype {value.dtype} is not {ops}'s {tap['dtype']}"
    spread = _spread_refusal(value, tap, sample, ops)
    if own is None:
        own = tap_agreement_db(value, tap, sample)
    whose = _misfiled(value, tap, sample, (own, agreement), others)
    if spread and whose:
        return f"{whose}; {spread}"
    return whose or spread


def _spread_refusal(value: torch.Tensor, tap: dict[str, Any], sample: int, ops: str) -> str | None:
    """The value's spread is not within SPREAD_FACTOR of the eager value's."""
    ranges = tap.get("eager_ranges") or []
    eager = ranges[sample] if sample < len(ranges) else None
    seen = finite_range(dequantized(value, tap))
    if eager is None or seen is None:
        return None
    expected, got = float(eager[1]) - float(eager[0]), seen[1] - seen[0]
    low, high = expected / SPREAD_FACTOR, expected * SPREAD_FACTOR
    if expected <= _TINY and got <= _TINY:
        return None
    if not low - _TINY <= got <= high + _TINY or math.isnan(got):
        return (
            f"its values span {got:.4g} ({seen[0]:.4g}..{seen[1]:.4g}, sample {sample}) where "
            f"{ops} spans {expected:.4g} ({eager[0]:.4g}..{eager[1]:.4g}) in the instrumented "
            f"program run eagerly: more than {SPREAD_FACTOR:g}x apart"
        )
    return None


def tap_agreement_db(value: torch.Tensor, tap: dict[str, Any], sample: int) -> float | None:
    """How closely (dB, estimated from sketches) the runtime's value agrees with the tap's value
    in the instrumented program run eagerly; None when taps.json holds no sketch for it."""
    sketches = tap.get("eager_sketches") or []
    eager = sketches[sample] if sample < len(sketches) else None
    if eager is None:
        return None
    return agreement_db(eager, sketch(dequantized(value, tap), str(tap["source"])))


def _misfiled(
    value: torch.Tensor,
    tap: dict[str, Any],
    sample: int,
    agreements: tuple[float | None, float | None],
    others: Sequence[dict[str, Any]],
) -> str | None:
    """The value is another tap's eager value, not its own: it is refused, naming whose it is.
    A value that agrees with no tap is kept for the comparison: the runtime computing an op
    otherwise than the eager program (a kernel's error, NaN quantized its own way) is a finding.
    `agreements`: the value's agreement with its own tap's eager value, and the bound."""
    own, agreement = agreements
    if own is None or agreement is None or own >= agreement:
        return None
    for other in others:
        if other is tap or int(_numel(other["shape"])) != value.numel():
            continue
        if str(other["dtype"]) != str(value.dtype):
            continue
        theirs = tap_agreement_db(value.reshape(other["shape"]), other, sample)
        if theirs is not None and theirs >= agreement:
            ops = ", ".join(tap.get("ops", ())) or tap.get("source", "?")
            return (
                f"it is {', '.join(other['ops'])}'s value (it agrees with that tap's eager value "
                f"by {theirs:.1f} dB, with {ops}'s by {own:.1f} dB; sample {sample})"
            )
    return None


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)
