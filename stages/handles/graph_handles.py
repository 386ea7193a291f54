"""Where a debug handle lives on an fx node, and every operator node of a program.

node.meta["custom"] holds the handle because torch.export serializes it and run_decompositions
copies it to the nodes a decomposition produces; node.meta["debug_handle"] mirrors it.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.export import ExportedProgram

from stages.handles.debug_handles import DEBUG_HANDLE_META, DebugHandle

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
