"""Make one kernel compute wrongly on purpose, to test the debugger (shared by delegates and executor)."""

from __future__ import annotations

from typing import Any

import torch

from stages.formats.closed_sets import FaultKind

FAULT_KINDS: tuple[str, ...] = tuple(kind.value for kind in FaultKind)


def apply_output_fault(output: Any, fault: dict[str, Any]) -> Any:
    """The output of a faulted kernel: scaled, offset, a NaN in it, or transposed.

    `transpose` swaps the last two dims when they are equal and reverses the last dim otherwise
    (so the shape stays valid). `epsilon` is applied ahead of time to the norm's eps argument.
    """
    if not isinstance(output, torch.Tensor) or not output.is_floating_point():
        return output
    kind, value = fault["kind"], float(fault.get("value", 1.5))
    if kind == "scale":
        return output * value
    if kind == "offset":
        return output + value
    if kind == "nan":
        broken = output.clone()
        broken.view(-1)[0] = float("nan")
        return broken
    if kind == "transpose":
        if output.dim() >= 2 and output.shape[-1] == output.shape[-2]:
            return output.transpose(-1, -2).contiguous()
        return output.flip(-1)
    return output
