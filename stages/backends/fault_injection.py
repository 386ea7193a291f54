"""Make one kernel compute wrongly on purpose, to test the debugger: the one fault mechanism.

Ahead of time, the lower stage and the delegates ask `fault_hits` whether a node or fused kernel
is the target and rewrite a norm's eps with `with_fault_eps`; the fault travels in the program
or processed bytes; at run time the executor and delegates call `apply_output_fault`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from stages.closed_sets import FaultKind
from stages.handles.debug_handles import DEBUG_HANDLE_META

FAULT_KINDS: tuple[str, ...] = tuple(kind.value for kind in FaultKind)
# Norm ops whose eps an `epsilon` fault replaces: op -> positional index of eps.
NORMS_WITH_EPS: dict[str, int] = {
    "aten.layer_norm.default": 4,
    "aten.native_layer_norm.default": 4,
    "aten._native_batch_norm_legit_no_training.default": 6,
    "aten.batch_norm.default": 7,
}


class FaultTargetError(ValueError):
    """An `epsilon` fault aimed at a node or kernel that holds no norm op."""


def fault_hits(
    fault: dict[str, Any] | None, nodes: Iterable[torch.fx.Node]
) -> dict[str, Any] | None:
    """A copy of the fault when one of the nodes is its target (by name or debug handle)."""
    if not fault:
        return None
    handle = fault.get("debug_handle")
    for node in nodes:
        if fault.get("node") and node.name == fault["node"]:
            return dict(fault)
        if handle is not None and node.meta.get(DEBUG_HANDLE_META) == int(handle):
            return dict(fault)
    return None


def with_fault_eps(op: str, args: list[Any], fault: dict[str, Any] | None) -> list[Any]:
    """The op's args, with eps set to the fault's value when an epsilon fault hits this norm."""
    if not fault or fault["kind"] != FaultKind.epsilon or op not in NORMS_WITH_EPS:
        return args
    index = NORMS_WITH_EPS[op]
    args = args + [None] * max(0, index + 1 - len(args))
    args[index] = float(fault.get("value", 1.5))
    return args


def require_norm_for_epsilon(fault: dict[str, Any] | None, ops: Sequence[str], where: str) -> None:
    """An epsilon fault needs a norm among the target's ops; `where` names the target."""
    if fault and fault["kind"] == FaultKind.epsilon and not any(op in NORMS_WITH_EPS for op in ops):
        raise FaultTargetError(
            f"backend.fault.kind=epsilon needs a norm op, but {where}; "
            "pick a layer_norm/batch_norm node or another fault kind"
        )


# The generation step the runtime is executing (0 outside a generation): a fault with
# `from_step` N acts from step N on (1: decode only), as a bug in a kernel's one-token path would.
_STEP = [0]


@contextmanager
def generation_step(step: int) -> Iterator[None]:
    """Executions inside are step `step` of a generation (0: the prefill)."""
    previous, _STEP[0] = _STEP[0], step
    try:
        yield
    finally:
        _STEP[0] = previous


def apply_output_fault(output: Any, fault: dict[str, Any]) -> Any:
    """The output of a faulted kernel: scaled, offset, a NaN in it, or transposed (the only
    kind that applies to integer and bool outputs, e.g. argmax indices).

    `transpose` swaps the last two dims when they are equal and reverses the last dim otherwise
    (so the shape stays valid). `epsilon` is applied ahead of time to the norm's eps argument.
    """
    if not isinstance(output, torch.Tensor) or _STEP[0] < int(fault.get("from_step") or 0):
        return output
    kind, value = fault["kind"], float(fault.get("value", 1.5))
    if not output.is_floating_point():  # integer/bool: only a reordering keeps values valid
        return _transposed(output) if kind == "transpose" else output
    if kind == "scale":
        return output * value
    if kind == "offset":
        return output + value
    if kind == "nan":
        broken = output.clone()  # keeps the output's strides: index, never view(-1)
        if broken.numel():
            broken[(0,) * broken.dim()] = float("nan")
        return broken
    if kind == "transpose":
        return _transposed(output)
    return output


def _transposed(output: torch.Tensor) -> torch.Tensor:
    if output.dim() >= 2 and output.shape[-1] == output.shape[-2]:
        return output.transpose(-1, -2).contiguous()
    return output.flip(-1)
