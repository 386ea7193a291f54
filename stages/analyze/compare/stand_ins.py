"""Runtime values standing in for reference nodes: laid out as the reference's, matched by
shape, and a delegate call's several outputs matched to the nodes they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from stages.analyze.compare.gap.groups import (
    GapGroup,
    RuntimeOutput,
    Value,
    group_outputs,
    is_getitem,
)
from stages.handles.debug_handles import DebugHandle


def _like(value: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """A logged value (contiguous, as the debug buffer stores it) with the reference's dtype and
    strides: ATen's kernels pick their path by layout (a permuted matmul input sums in another
    order), so the local re-run must see the layout the runtime's op saw."""
    value = value.to(reference.dtype)
    if value.stride() == reference.stride():
        return value
    try:
        laid_out = torch.empty_strided(reference.shape, reference.stride(), dtype=reference.dtype)
        return laid_out.copy_(value)
    except RuntimeError:  # an expanded view (stride 0) cannot be written: keep it contiguous
        return value


def _same_kind(value: torch.Tensor, ref: torch.Tensor) -> bool:
    """Same shape, and both floating point or both not."""
    shaped = tuple(value.shape) == tuple(ref.shape)
    return shaped and value.is_floating_point() == ref.is_floating_point()


def _stand_in(value: Value, ref: Any, lists: bool = True) -> Any:
    """`value` laid out like the reference value `ref` when shapes make the match certain (with
    `lists`, also a list of values for a multi-output op's tuple or list), else None."""
    if isinstance(ref, torch.Tensor) and isinstance(value, torch.Tensor):
        return _like(value, ref) if tuple(ref.shape) == tuple(value.shape) else None
    if isinstance(ref, torch.Tensor) and isinstance(value, list):
        # One reference output, several runtime ones (ExecuTorch's native_layer_norm for
        # aten.layer_norm: value, mean, rstd): the only one of the reference's shape and kind.
        same = [v for v in value if isinstance(v, torch.Tensor) and _same_kind(v, ref)]
        return _like(same[0], ref) if len(same) == 1 else None
    if lists and isinstance(ref, tuple | list) and isinstance(value, torch.Tensor):
        # Several reference outputs, one runtime value (a delegate's BatchNorm gives its value,
        # not the batch statistics aten's op also returns): the value stands in for the only
        # output of its shape and kind, the others stay the reference's.
        fits = [
            i for i, r in enumerate(ref) if isinstance(r, torch.Tensor) and _same_kind(value, r)
        ]
        if len(fits) != 1:
            return None
        return type(ref)(_like(value, r) if i == fits[0] else r for i, r in enumerate(ref))
    if (
        lists
        and isinstance(ref, tuple | list)
        and isinstance(value, list)
        and len(ref) == len(value)
    ):
        # split/chunk/unbind give lists, multi-output ops tuples: keep the reference's type
        return type(ref)(
            _like(v, r) if isinstance(v, torch.Tensor) and isinstance(r, torch.Tensor) else r
            for v, r in zip(value, ref, strict=True)
        )
    return None


def last_stand_in(candidates: Sequence[Value], ref: Any, lists: bool = True) -> Any:
    """The last of `candidates` (runtime values logged for one node, in order) that can stand in
    for `ref`; None when none can."""
    for value in reversed(candidates):
        found = _stand_in(value, ref, lists)
        if found is not None:
            return found
    return None


def multi_output_nodes(group: GapGroup, runtime: Value, reference: Any) -> list[torch.fx.Node]:
    """For a call logging k > 1 outputs whose anchor is not a k-output op (a delegate call
    returning several of its ops' values), the k group nodes they are; else none."""
    if not isinstance(runtime, list) or len(runtime) < 2:
        return []
    if isinstance(reference, list | tuple) and len(reference) == len(runtime):
        return []  # a multi-output op (native_dropout's value and mask): output i is output i
    leaving = group_outputs(group)
    return leaving if len(leaving) == len(runtime) else []


def partition_candidates(
    sample_outputs: list[RuntimeOutput], groups: list[GapGroup], group_of: dict[DebugHandle, int]
) -> dict[torch.fx.Node, list[Value]]:
    """A delegate call's logged outputs (a partition compared as a whole) as candidates for the
    partition's output nodes, in the partition's output order (nodes read from outside)."""
    found: dict[torch.fx.Node, list[Value]] = {}
    for out in sample_outputs:
        link = out.link
        if link.partition_id is None or link.delegate_debug_identifier is not None:
            continue
        values = out.value if isinstance(out.value, list) else [out.value]
        group = groups[group_of[link.debug_handles[0]]]
        members = set(group.nodes)
        outputs = [
            n
            for n in group.nodes
            if (is_getitem(n) or not isinstance(n.meta.get("val"), list | tuple))
            and any(user not in members for user in n.users)
        ]
        if len(outputs) != len(values):
            continue
        for node, value in zip(outputs, values, strict=True):
            found.setdefault(node, []).append(value)
    return found
