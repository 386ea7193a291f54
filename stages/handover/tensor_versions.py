"""Version counters of tensors several holders share: every in-place write bumps one (through a
view or `detach()` too), so a holder can tell that the values it kept were written to."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def has_version(tensor: torch.Tensor) -> bool:
    """Inference tensors keep no version counter: sharing one could not be checked."""
    return not tensor.is_inference()


def tensor_versions(tensors: Iterable[torch.Tensor]) -> tuple[int, ...] | None:
    """The tensors' version counters, in order; None when one of them keeps none."""
    found: list[int] = []
    for tensor in tensors:
        if not has_version(tensor):
            return None
        found.append(tensor._version)
    return tuple(found)
