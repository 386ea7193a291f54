"""Domain aliases and the node-meta key for debug handles."""

from __future__ import annotations

from typing import Any

DebugHandle = int
DelegateIdentifier = int | str

# node.meta key that carries a node's debug handle in every fx graph of the pipeline.
DEBUG_HANDLE_META = "debug_handle"


def get_debug_handle(node: Any) -> DebugHandle | None:
    """The debug handle stored on an fx node, or None when it has none."""
    value = node.meta.get(DEBUG_HANDLE_META)
    return int(value) if value is not None else None
