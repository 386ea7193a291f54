"""Per debug handle, the node names `backend.fault.node` takes: `NAME` at the top level,
`GRAPH.NAME` inside a cond branch (`false_graph_0.linear`), so a branch op is never confused
with a top-level op of the same name."""

from __future__ import annotations

import operator

import torch

from stages.handles.debug_handles import DEBUG_HANDLE_META, DebugHandle
from stages.handles.graph_handles import iter_graph_modules


def fault_node_names(gm: torch.fx.GraphModule) -> dict[DebugHandle, list[str]]:
    """Handle → qualified names of its operator nodes (getitems left out), in graph order."""
    graphs = {id(gm): ""}
    for owner in iter_graph_modules(gm):
        for child_name, child in owner.named_children():
            graphs.setdefault(id(child), child_name)
    names: dict[DebugHandle, list[str]] = {}
    for module in iter_graph_modules(gm):
        graph = graphs.get(id(module), "")
        for node in module.graph.nodes:
            handle = node.meta.get(DEBUG_HANDLE_META)
            if node.op != "call_function" or node.target is operator.getitem or handle is None:
                continue
            names.setdefault(int(handle), []).append(f"{graph}.{node.name}" if graph else node.name)
    return names


def names_of(names: dict[DebugHandle, list[str]], handles: tuple[DebugHandle, ...]) -> list[str]:
    """The qualified names of a group's handles, in handle order."""
    return [name for h in handles for name in names.get(h, [])]
