"""How one group output is compared: runtime and reference tensors paired, float outputs
through the comparators, integer and bool outputs exactly, index outputs by the tie rule."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from stages.analyze.compare.comparators import Comparator, compare_all, identical_value
from stages.analyze.compare.exact_compare import (
    IndexOutput,
    count_index_mismatches,
    count_mismatches,
    index_output,
)
from stages.analyze.compare.expected_error import bit_identical
from stages.analyze.compare.gap.groups import GapGroup, Value
from stages.analyze.compare.runtime_outputs import scalar_tensor
from stages.analyze.link.view_shapes import same_but_unit_dims

RESHAPE_OPS = frozenset({"view", "view_copy", "_unsafe_view", "reshape"})


def _shape_of(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _is_view(value: Any, shape: tuple[int, ...] | None, reshaped: bool) -> bool:
    """A runtime tensor holding a reference shape's elements in order: size-1 dims aside, or
    any shape of as many elements when the reference op only reshapes (`reshaped`)."""
    if not isinstance(value, torch.Tensor) or shape is None:
        return False
    if same_but_unit_dims(tuple(value.shape), shape):
        return True
    return reshaped and value.numel() == math.prod(shape)


def _as_view(value: Any, shape: tuple[int, ...] | None, reshaped: bool) -> Any:
    """`value` in the reference's shape when it holds the same elements in order."""
    if shape is None or not _is_view(value, shape, reshaped) or tuple(value.shape) == shape:
        return value
    return value.reshape(shape)


def reshapes_only(node: torch.fx.Node | None) -> bool:
    """Whether the op only reshapes its input (view_copy, view, reshape): a delegate may return
    the value before it, which ExecuTorch then views at runtime (`et_view`)."""
    if node is None or node.op != "call_function":
        return False
    name = str(getattr(node.target, "__name__", node.target))
    parts = name.split(".")
    return (parts[-2] if len(parts) >= 2 else name) in RESHAPE_OPS


def output_pairs(
    runtime: Value, reference: Any, reshaped: bool = False
) -> tuple[list[tuple[int, Any, Any]], str]:
    """(output index, runtime tensor, reference tensor) to compare, and a status; `reshaped`:
    the reference op only reshapes (see `reshapes_only`)."""
    rts = list(runtime) if isinstance(runtime, list | tuple) else [runtime]
    refs = [
        scalar_tensor(r)
        for r in (list(reference) if isinstance(reference, list | tuple) else [reference])
    ]
    if len(rts) == len(refs):
        pairs = [
            (i, _as_view(a, _shape_of(b), reshaped), b)
            for i, a, b in zip(range(len(rts)), rts, refs, strict=True)
        ]
    elif len(refs) == 1 and isinstance(refs[0], torch.Tensor):  # e.g. native_layer_norm's 3
        # the runtime op's output of the reference's shape and kind: native_dropout's value,
        # never its bool mask of the same shape
        shape, floating = tuple(refs[0].shape), refs[0].is_floating_point()
        same = [t for t in rts if isinstance(t, torch.Tensor) and tuple(t.shape) == shape]
        same = same or [_as_view(t, shape, reshaped) for t in rts if _is_view(t, shape, reshaped)]
        kind = [t for t in same if t.is_floating_point() == floating]
        pairs = [(0, (kind or same or rts)[-1], refs[0])]
    elif len(rts) == 1 and isinstance(rts[0], torch.Tensor):
        match = [
            i
            for i, r in enumerate(refs)
            if isinstance(r, torch.Tensor) and tuple(r.shape) == tuple(rts[0].shape)
        ]
        match = match or [i for i, r in enumerate(refs) if _is_view(rts[0], _shape_of(r), reshaped)]
        if not match:
            return [(0, rts[0], None)], "shape_mismatch"
        reference = refs[match[-1]]
        pairs = [(match[-1], _as_view(rts[0], tuple(reference.shape), reshaped), reference)]
    else:
        return [], "output_count_mismatch"
    return [
        (i, a, b)
        for i, a, b in pairs
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    ], "ok"


def pair_status(rt: torch.Tensor, ref: torch.Tensor | None) -> str:
    if ref is None or tuple(rt.shape) != tuple(ref.shape):
        return "shape_mismatch"
    if rt.is_floating_point() != ref.is_floating_point() or (
        not rt.is_floating_point() and rt.dtype != ref.dtype
    ):
        return "dtype_mismatch"
    return "ok"


def compare_values(
    comparators: Sequence[Comparator], runtime: list[torch.Tensor], reference: list[torch.Tensor]
) -> dict[str, float]:
    if bit_identical(runtime, reference):  # every exact fp32 output: no arithmetic needed
        known = {c.name: identical_value(c) for c in comparators}
        if all(v is not None for v in known.values()):
            return {name: float(v) for name, v in known.items() if v is not None}
    rt = torch.cat([t.detach().double().flatten() for t in runtime])
    ref = torch.cat([t.detach().double().flatten() for t in reference])
    return compare_all(comparators, rt, ref)


@dataclass(frozen=True)
class CompareRule:
    """How one group output is compared: float comparators, exact counts, or the index rule."""

    comparators: Sequence[Comparator]
    index: IndexOutput | None
    tolerance: float

    def kind(self, runtime: torch.Tensor) -> str:
        if runtime.is_floating_point() or runtime.is_complex():
            return "float"
        return "index" if self.index is not None else "exact"

    def compare(
        self,
        kind: str,
        runtime: list[torch.Tensor],
        reference: list[torch.Tensor],
        ranked: list[Any],
    ) -> dict[str, float]:
        if kind == "float":
            return compare_values(self.comparators, runtime, reference)
        spec = self.index
        if (
            kind == "index"
            and spec is not None
            and len(ranked) == len(runtime)
            and all(isinstance(x, torch.Tensor) for x in ranked)
        ):
            return count_index_mismatches(runtime, reference, ranked, spec, self.tolerance)
        return count_mismatches(runtime, reference)


def rule_for(
    group: GapGroup, output_index: int, comparators: Sequence[Comparator], tolerance: float
) -> CompareRule:
    spec = index_output(group.anchor) if group.anchor is not None else None
    if spec is not None and spec.output_index != output_index:
        spec = None
    return CompareRule(comparators, spec, tolerance)
