"""Numeric comparators: one method each, plug-ins by name or by a user's `_target_`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from stages.dotted_import import callable_target, given_spec


class ComparatorError(ValueError):
    """An unknown comparator name or a custom comparator that cannot be built."""


class Comparator(Protocol):
    """compare(runtime, reference) -> a float; `higher_is_better` orients thresholds."""

    @property
    def name(self) -> str: ...
    @property
    def higher_is_better(self) -> bool: ...
    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float: ...


def _pair(runtime: torch.Tensor, reference: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return runtime.detach().double().flatten(), reference.detach().double().flatten()


def _diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a − b, zero where both hold the same value, including the same ±inf or both NaN.

    Attention masks carry -inf on both sides; inf − inf would otherwise poison every metric.
    """
    d = a - b
    if bool(torch.isfinite(d).all()):  # the common case: one pass, no masks
        return d
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    return torch.where(same, torch.zeros_like(a), d)


@dataclass(frozen=True)
class MSE:
    name: str = "mse"
    higher_is_better: bool = False

    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float:
        a, b = _pair(runtime, reference)
        d = _diff(a, b)
        return float(torch.dot(d, d)) / a.numel() if a.numel() else 0.0


@dataclass(frozen=True)
class MeanAbs:
    """Mean absolute error (size-independent; what this tool called `l1` before)."""

    name: str = "mean_abs"
    higher_is_better: bool = False

    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float:
        a, b = _pair(runtime, reference)
        return float(_diff(a, b).abs().mean()) if a.numel() else 0.0


@dataclass(frozen=True)
class L1:
    """Sum of absolute differences, as ExecuTorch's L1 comparator (grows with tensor size)."""

    name: str = "l1"
    higher_is_better: bool = False

    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float:
        a, b = _pair(runtime, reference)
        return float(_diff(a, b).abs().sum())


@dataclass(frozen=True)
class SNR:
    """Signal-to-noise ratio in dB: 10·log10(Σref² / Σ(ref−run)²) over finite reference values."""

    name: str = "snr"
    higher_is_better: bool = True

    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float:
        a, b = _pair(runtime, reference)
        d = _diff(a, b)
        noise = float(torch.dot(d, d))
        finite = b if bool(torch.isfinite(b).all()) else b[torch.isfinite(b)]
        return _snr_db(noise, float(torch.dot(finite, finite)))


@dataclass(frozen=True)
class Cosine:
    """Cosine similarity over positions finite on both sides; NaN if non-finite values differ."""

    name: str = "cosine"
    higher_is_better: bool = True

    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float:
        a, b = _pair(runtime, reference)
        finite = torch.isfinite(a) & torch.isfinite(b)
        if bool((_diff(a, b)[~finite] != 0).any()):
            return math.nan
        a, b = a[finite], b[finite]
        return _cosine(float(a.norm()), float(b.norm()), a, b)


@dataclass(frozen=True)
class MaxAbs:
    name: str = "max_abs"
    higher_is_better: bool = False

    def compare(self, runtime: torch.Tensor, reference: torch.Tensor) -> float:
        a, b = _pair(runtime, reference)
        return float(_diff(a, b).abs().max()) if a.numel() else 0.0


BUILTIN: dict[str, Comparator] = {
    c.name: c for c in (MSE(), MeanAbs(), L1(), SNR(), Cosine(), MaxAbs())
}
# What each built-in gives for two bit-identical tensors (no NaN): no need to compute it.
IDENTICAL_VALUE: dict[str, float] = {
    "mse": 0.0,
    "mean_abs": 0.0,
    "l1": 0.0,
    "snr": math.inf,
    "cosine": 1.0,
    "max_abs": 0.0,
}


def compare_all(
    comparators: Sequence[Comparator], runtime: torch.Tensor, reference: torch.Tensor
) -> dict[str, float]:
    """Every comparator's value on one pair, each exactly as its own `compare` gives it; the
    built-ins share one float64 difference when every value is finite (the common case), where
    each alone would compute it, and its finiteness checks, again."""
    a, b = _pair(runtime, reference)
    builtins_only = all(type(c) in _BUILTIN_TYPES for c in comparators)
    d = a - b if comparators and a.numel() and builtins_only else None
    if d is None or not bool(torch.isfinite(d).all()):  # when it is, a and b are finite too
        return {c.name: float(c.compare(runtime, reference)) for c in comparators}
    noise = float(torch.dot(d, d))
    magnitude = d.abs()
    values: dict[type, Callable[[], float]] = {
        MSE: lambda: noise / a.numel(),
        MeanAbs: lambda: float(magnitude.mean()),
        L1: lambda: float(magnitude.sum()),
        MaxAbs: lambda: float(magnitude.max()),
        SNR: lambda: _snr_db(noise, float(torch.dot(b, b))),
        Cosine: lambda: _cosine(float(a.norm()), float(b.norm()), a, b),
    }
    return {c.name: values[type(c)]() for c in comparators}


def _snr_db(noise: float, signal: float) -> float:
    """SNR.compare's value from its two sums."""
    if not math.isfinite(noise):
        return -math.inf
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _cosine(na: float, nb: float, a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine.compare's value from the norms, when every value is finite."""
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float((a @ b) / (na * nb))


def identical_value(comparator: Comparator) -> float | None:
    """A built-in's value on bit-identical inputs; None for a user's comparator (compute it)."""
    return IDENTICAL_VALUE.get(comparator.name) if type(comparator) in _BUILTIN_TYPES else None


_BUILTIN_TYPES = {type(c) for c in BUILTIN.values()}


def _custom(spec: dict[str, Any]) -> Comparator:
    factory = callable_target(
        spec,
        "analyze.custom_comparator",
        ComparatorError,
        "package.module.Class` naming a class with `name`, `higher_is_better` and "
        "`compare(runtime, reference) -> float",
    )
    target = spec["_target_"]
    kwargs = {k: v for k, v in spec.items() if k != "_target_"}
    try:
        comparator = factory(**kwargs)
    except TypeError as exc:
        raise ComparatorError(
            f"analyze.custom_comparator: {target}({', '.join(kwargs)}) failed: {exc}"
        ) from exc
    for needed in ("name", "higher_is_better", "compare"):
        if not hasattr(comparator, needed):
            raise ComparatorError(
                f"analyze.custom_comparator._target_={target!r} has no `{needed}`; a comparator "
                "has name, higher_is_better and compare(runtime, reference) -> float"
            )
    return comparator


def build_comparators(names: list[str], custom: dict[str, Any] | None) -> list[Comparator]:
    """Built-ins by name, then the custom one (its name may be used as the gap metric)."""
    unknown = [n for n in names if n not in BUILTIN]
    if unknown:
        raise ComparatorError(
            f"analyze.comparators: unknown {unknown}; choose from {sorted(BUILTIN)} or add "
            "analyze.custom_comparator._target_=..."
        )
    comparators = [BUILTIN[n] for n in names]
    spec = given_spec(custom)
    if spec is not None:
        comparators.append(_custom(spec))
    return comparators


def crosses(value: float, threshold: float, higher_is_better: bool) -> bool:
    """True when a gap value is on the wrong side of its threshold (NaN always is)."""
    if math.isnan(value):
        return True
    return value < threshold if higher_is_better else value > threshold
