"""Exact comparison for integer and bool outputs, and the tie rule for index outputs.

Integer and bool outputs are counted, not measured: `mismatches` and `mismatch_fraction`. An
index output (topk/sort/argsort indices, argmax/argmin, max/min/kthvalue/median/mode.dim
indices) may legitimately differ where the values it ranks nearly tie; such a mismatch is a
`tie_flip` when the values at the runtime's index and at the reference's index differ by at most
`tolerance × max|x|` in the tensor the op ranked. Every other mismatch is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Ops with an indices output: (output index of the indices, the schema's dim argument name).
_INDEX_OPS: dict[str, int] = {
    "aten.topk.default": 1,
    "aten.sort.default": 1,
    "aten.sort.stable": 1,
    "aten.argsort.default": 0,
    "aten.argsort.stable": 0,
    "aten.argmax.default": 0,
    "aten.argmin.default": 0,
    "aten.max.dim": 1,
    "aten.min.dim": 1,
    "aten.kthvalue.default": 1,
    "aten.median.dim": 1,
    "aten.mode.default": 1,
}

# Relative tolerance for a tie, per precision: fp32 only equal values (emulated kernels are
# exact), fp16 about two half-precision ulps, int8 two steps of a per-tensor int8 scale.
INDEX_TIE_TOLERANCE: dict[str, float] = {"fp32": 1e-6, "fp16": 2e-3, "int8": 2.0 / 127.0}
EXACT_KEYS = ("mismatches", "mismatch_fraction", "tie_flips")


@dataclass(frozen=True)
class IndexOutput:
    """Which output of an op holds indices into its first argument, and along which dim."""

    output_index: int
    dim: int | None  # None: indices into the flattened input (argmax/argmin without dim)
    keepdim: bool


def tie_tolerance(precision: str) -> float:
    """The index tie tolerance for a precision (unknown precisions: the int8 one, the loosest)."""
    return INDEX_TIE_TOLERANCE.get(precision, INDEX_TIE_TOLERANCE["int8"])


def index_output(node: torch.fx.Node) -> IndexOutput | None:
    """The node's indices output, if its op ranks its first argument."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return None
    name = f"{target.namespace}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    if name not in _INDEX_OPS:
        return None
    bound: dict[str, object] = {}
    for position, argument in enumerate(target._schema.arguments):
        if position < len(node.args):
            bound[argument.name] = node.args[position]
        elif argument.name in node.kwargs:
            bound[argument.name] = node.kwargs[argument.name]
        elif argument.has_default_value():
            bound[argument.name] = argument.default_value
    dim = bound.get("dim")
    keepdim = bool(bound.get("keepdim", True)) if "keepdim" in bound else True
    return IndexOutput(_INDEX_OPS[name], int(dim) if isinstance(dim, int) else None, keepdim)


def _gather(ranked: torch.Tensor, indices: torch.Tensor, spec: IndexOutput) -> torch.Tensor:
    """The ranked values the indices point at (same shape as `indices`)."""
    if spec.dim is None:
        return ranked.reshape(-1)[indices.reshape(-1)].reshape(indices.shape)
    dim = spec.dim % max(ranked.dim(), 1)
    picked = indices if spec.keepdim or indices.dim() == ranked.dim() else indices.unsqueeze(dim)
    return torch.gather(ranked, dim, picked).reshape(indices.shape)


def count_mismatches(
    runtime: list[torch.Tensor], reference: list[torch.Tensor]
) -> dict[str, float]:
    """Exact comparison of integer/bool samples: how many elements differ, and what fraction."""
    total = sum(t.numel() for t in reference)
    wrong = sum(int((a != b).sum()) for a, b in zip(runtime, reference, strict=True))
    return {"mismatches": float(wrong), "mismatch_fraction": wrong / total if total else 0.0}


def count_index_mismatches(
    runtime: list[torch.Tensor],
    reference: list[torch.Tensor],
    ranked: list[torch.Tensor],
    spec: IndexOutput,
    tolerance: float,
) -> dict[str, float]:
    """Mismatches of an index output, and how many of them are tie flips."""
    counts = count_mismatches(runtime, reference)
    flips = 0
    for rt, ref, values in zip(runtime, reference, ranked, strict=True):
        differ = rt != ref
        if not bool(differ.any()):
            continue
        x = values.detach().double()
        scale = float(x.abs().max()) if x.numel() else 0.0
        try:
            gap = (_gather(x, rt.long(), spec) - _gather(x, ref.long(), spec)).abs()
        except (IndexError, RuntimeError):  # an index out of range is never a tie
            continue
        flips += int((differ & (gap <= tolerance * scale)).sum())
    return counts | {"tie_flips": float(flips)}


def exact_errors(values: dict[str, float]) -> float:
    """Mismatches that are not tie flips."""
    return values.get("mismatches", 0.0) - values.get("tie_flips", 0.0)
