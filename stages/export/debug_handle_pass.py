"""Give every operator node of an exported program an integer debug handle (from 1).

Handles live in node.meta["custom"] (torch.export serializes it and run_decompositions copies it
to the nodes a decomposition produces, so they keep their ancestor's handle) and are mirrored in
node.meta["debug_handle"] for fast access.
"""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handles.graph_handles import iter_operator_nodes, set_debug_handle


def _source_of_getitem(node: torch.fx.Node) -> torch.fx.Node | None:
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        return node.args[0]
    return None


def assign_debug_handles(program: ExportedProgram) -> int:
    """Number operator nodes from 1; getitem nodes share their source's handle. Returns the count."""
    next_handle = 1
    for node in iter_operator_nodes(program.graph_module):
        source = _source_of_getitem(node)
        if source is not None and source.meta.get(DEBUG_HANDLE_META) is not None:
            handle = int(source.meta[DEBUG_HANDLE_META])
        else:
            handle = next_handle
            next_handle += 1
        set_debug_handle(node, handle)
    return next_handle - 1


def missing_debug_handles(program: ExportedProgram) -> list[str]:
    """Names of operator nodes without a handle (empty when the program is fully annotated)."""
    return [
        node.name
        for node in iter_operator_nodes(program.graph_module)
        if node.meta.get(DEBUG_HANDLE_META) is None
    ]
