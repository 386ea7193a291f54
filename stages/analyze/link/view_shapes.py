"""Shapes that hold the same elements in the same order: equal once size-1 dimensions are dropped.

A delegate may return an op's value before a trailing view that only adds or drops size-1
dimensions (ExecuTorch keeps such a view as its own `et_view` instruction in a program with
dynamic shapes, e.g. `bmm`'s `[4, n, 16]` before `view_copy` to `[1, 4, n, 16]`): that output is
the op's value, compared as the op's shape.
"""

from __future__ import annotations

from collections.abc import Sequence


def same_but_unit_dims(shape: Sequence[int], other: Sequence[int]) -> bool:
    """Whether the shapes differ at most by size-1 dimensions (a view of the same elements)."""
    return tuple(d for d in shape if d != 1) == tuple(d for d in other if d != 1)
