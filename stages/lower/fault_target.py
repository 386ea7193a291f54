"""Which node a fault names, and whether faulting it can change anything (before lowering).

`backend.fault.node=NAME` must name one node: a name found in several graphs (the top level and
torch.cond branches each have their own namespace) is refused with every match and its debug
handle; `GRAPH.NAME` (e.g. `false_graph_0.sub`) picks the node of one branch. A fault that
provably changes nothing (a non-float output, a transpose of a size-1 last dim) gets a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handles.graph_handles import iter_graph_modules

TOP_LEVEL = ""


class AmbiguousFaultTargetError(ValueError):
    """`backend.fault.node` names several nodes, or a GRAPH.NAME that does not exist."""


@dataclass(frozen=True)
class NamedNode:
    """An operator node and the graph it lives in ("" for the top level, else its attribute)."""

    graph: str
    node: torch.fx.Node

    @property
    def qualified(self) -> str:
        return f"{self.graph}.{self.node.name}" if self.graph else self.node.name

    @property
    def handle(self) -> int | None:
        value = self.node.meta.get(DEBUG_HANDLE_META)
        return int(value) if value is not None else None


def operator_nodes(gm: torch.fx.GraphModule) -> list[NamedNode]:
    """Every call_function node of the program with the name of the graph it is in."""
    names = {id(gm): TOP_LEVEL}
    for owner in iter_graph_modules(gm):
        for child_name, child in owner.named_children():
            names.setdefault(id(child), child_name)
    return [
        NamedNode(names.get(id(module), TOP_LEVEL), node)
        for module in iter_graph_modules(gm)
        for node in module.graph.nodes
        if node.op == "call_function"
    ]


def resolve_fault_node(gm: torch.fx.GraphModule, fault: dict[str, Any]) -> dict[str, Any]:
    """The fault aimed at exactly one node: unchanged for a unique NAME, by the node's debug
    handle for GRAPH.NAME; raises AmbiguousFaultTargetError for a NAME found in several graphs."""
    wanted = fault.get("node")
    if not wanted:
        return fault
    nodes = operator_nodes(gm)
    qualified = [n for n in nodes if n.qualified == wanted]
    if "." in str(wanted) and qualified:
        (match,) = qualified[:1]
        return {**fault, "node": None, "debug_handle": match.handle, "qualified_node": wanted}
    matches = [n for n in nodes if n.node.name == wanted]
    if len(matches) > 1:
        listed = ", ".join(f"{m.qualified} (debug handle {m.handle})" for m in matches)
        raise AmbiguousFaultTargetError(
            f"backend.fault.node={wanted} matches {len(matches)} nodes: {listed}; pick one with "
            f"backend.fault.node=GRAPH.NAME (e.g. {matches[-1].qualified}) or "
            f"backend.fault.debug_handle=N"
        )
    return fault


def targets(gm: torch.fx.GraphModule, fault: dict[str, Any]) -> list[NamedNode]:
    """The nodes the (resolved) fault hits: by name, or by debug handle."""
    handle = fault.get("debug_handle")
    return [
        n
        for n in operator_nodes(gm)
        if (fault.get("node") and n.node.name == fault["node"])
        or (handle is not None and n.handle == int(handle))
    ]


def _no_op_reason(node: torch.fx.Node, kind: str) -> str:
    """Why faulting this node's output provably changes nothing, or ""."""
    if kind == "epsilon":
        return ""  # applied to a norm's eps, refused elsewhere when there is no norm
    value = node.meta.get("val")
    first = value[0] if isinstance(value, list | tuple) and value else value
    if not isinstance(first, torch.Tensor):
        return ""
    if not first.is_floating_point() and kind != "transpose":
        return (
            f"its output is {str(first.dtype).removeprefix('torch.')} and kind={kind} changes "
            "only float outputs (kind=transpose reorders integer/bool ones)"
        )
    shape = tuple(first.shape)
    if kind == "transpose" and shape and shape[-1] == 1:  # a 1x1 transpose or a size-1 flip
        return f"kind=transpose of an output of shape {list(shape)} leaves it as it is"
    return ""


def no_op_warnings(gm: torch.fx.GraphModule, fault: dict[str, Any]) -> list[str]:
    """A warning per targeted node the fault provably leaves unchanged."""
    warnings = []
    for target in targets(gm, fault):
        reason = _no_op_reason(target.node, str(fault.get("kind")))
        if reason:
            warnings.append(f"the fault on {target.qualified} changes nothing: {reason}")
        if target.graph:
            warnings.append(
                f"{target.qualified} is inside a torch.cond branch: the fault changes the run "
                "only when that branch is taken (summary.json control_flow says which ran)"
            )
    return warnings
