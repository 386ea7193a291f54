"""Make one kernel compute wrongly on purpose, to test the debugger (shared by delegates and executor)."""

from __future__ import annotations

from typing import Any

import torch

FAULT_KINDS = ("scale", "offset", "epsilon", "nan", "transpose")


def apply_output_fault(output: Any, fault: dict[str, Any]) -> Any:
    """The output of a faulted kernel: scaled, offset, a NaN in it, or transposed (the only
    kind that applies to integer and bool outputs, e.g. argmax indices).

    `transpose` swaps the last two dims when they are equal and reverses the last dim otherwise
    (so the shape stays valid). `epsilon` is applied ahead of time to the norm's eps argument.
    """
    if not isinstance(output, torch.Tensor):
        return output
    kind, value = fault["kind"], float(fault.get("value", 1.5))
    if not output.is_floating_point():  # integer/bool: only a reordering keeps values valid
        return _transposed(output) if kind == "transpose" else output
    if kind == "scale":
        return output * value
    if kind == "offset":
        return output + value
    if kind == "nan":
        broken = output.clone()
        broken.view(-1)[0] = float("nan")
        return broken
    if kind == "transpose":
        return _transposed(output)
    return output


def _transposed(output: torch.Tensor) -> torch.Tensor:
    if output.dim() >= 2 and output.shape[-1] == output.shape[-2]:
        return output.transpose(-1, -2).contiguous()
    return output.flip(-1)
