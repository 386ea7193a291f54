"""Give every operator node of an exported program an integer debug handle (from 1).

Handles live in node.meta["custom"] (torch.export serializes it and run_decompositions copies it
to the nodes a decomposition produces, so they keep their ancestor's handle) and are mirrored in
node.meta["debug_handle"] for fast access.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator

import torch
from torch.export import ExportedProgram

from stages.formats.debug_handles import DEBUG_HANDLE_META, DebugHandle

CUSTOM_META = "custom"


def iter_graph_modules(gm: torch.fx.GraphModule) -> Iterator[torch.fx.GraphModule]:
    """The graph module and, depth first in graph order, the subgraphs its nodes call (cond, map)."""
    yield gm
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            sub = getattr(gm, str(node.target), None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from iter_graph_modules(sub)


def iter_operator_nodes(gm: torch.fx.GraphModule) -> Iterator[torch.fx.Node]:
    """Every call_function node of the program, subgraphs included."""
    for module in iter_graph_modules(gm):
        for node in module.graph.nodes:
            if node.op == "call_function":
                yield node


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


def set_debug_handle(node: torch.fx.Node, handle: DebugHandle) -> None:
    # A fresh dict: nodes inlined from one wrapper share their `custom` meta object.
    node.meta[CUSTOM_META] = {**(node.meta.get(CUSTOM_META) or {}), DEBUG_HANDLE_META: handle}
    node.meta[DEBUG_HANDLE_META] = handle


def restore_debug_handles(program: ExportedProgram) -> None:
    """Mirror handles from node.meta["custom"] (which survives serialization and decomposition)."""
    for node in iter_operator_nodes(program.graph_module):
        custom = node.meta.get(CUSTOM_META) or {}
        if DEBUG_HANDLE_META in custom:
            node.meta[DEBUG_HANDLE_META] = int(custom[DEBUG_HANDLE_META])
        else:
            node.meta.pop(DEBUG_HANDLE_META, None)


def missing_debug_handles(program: ExportedProgram) -> list[str]:
    """Names of operator nodes without a handle (empty when the program is fully annotated)."""
    return [
        node.name
        for node in iter_operator_nodes(program.graph_module)
        if node.meta.get(DEBUG_HANDLE_META) is None
    ]
