"""torch.cond in the analysis: branch ops as comparable nodes, the branch each side took, flips.

The runtime logs the ops of the branch it ran and the cond's outputs; the reference values of
those branch ops come from running the same branch of the exported program on the reference
operands. When the runtime took the other branch than the reference, control flow diverged:
that is its own verdict cause, and the ops downstream of the cond are not blamed for it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.handles.debug_handles import DebugHandle, get_debug_handle

# Comparison ops whose float input is the value that moved when a predicate flipped.
_COMPARISONS = ("gt", "ge", "lt", "le", "eq", "ne")


@dataclass(frozen=True)
class CondSite:
    """One top-level torch.cond node, its predicate, operands and both branch graphs."""

    node: torch.fx.Node
    predicate: torch.fx.Node | None
    operands: tuple[Any, ...]
    branches: tuple[torch.fx.GraphModule, torch.fx.GraphModule]  # (true, false)

    def branch_nodes(self, taken: bool) -> list[torch.fx.Node]:
        graph = self.branches[0 if taken else 1].graph
        return [n for n in graph.nodes if n.op == "call_function"]

    def branch_handles(self, taken: bool) -> set[DebugHandle]:
        return {h for n in self.branch_nodes(taken) if (h := get_debug_handle(n)) is not None}

    def placeholders(self, taken: bool) -> list[torch.fx.Node]:
        return [n for n in self.branches[0 if taken else 1].graph.nodes if n.op == "placeholder"]

    def branch_outputs(self, taken: bool) -> list[Any]:
        out = next(n for n in self.branches[0 if taken else 1].graph.nodes if n.op == "output")
        return list(out.args[0])


@dataclass
class CondRecord:
    """The branch each side took at one cond, per sample, and the predicate values that chose."""

    name: str
    debug_handle: DebugHandle | None
    predicate_op: str
    predicate_input: str
    reference_branch: list[bool | None] = field(default_factory=list)
    runtime_branch: list[bool | None] = field(default_factory=list)
    reference_value: list[Any] = field(default_factory=list)
    runtime_value: list[Any] = field(default_factory=list)

    @property
    def flipped_samples(self) -> list[int]:
        return [
            i
            for i, (ref, rt) in enumerate(
                zip(self.reference_branch, self.runtime_branch, strict=True)
            )
            if ref is not None and rt is not None and ref != rt
        ]

    def message(self) -> str:
        """`control flow diverged at `cond`: reference took true, runtime took false; ...`."""
        i = self.flipped_samples[0]
        ref, rt = self.reference_branch[i], self.runtime_branch[i]
        what = f"`{self.predicate_op}`"
        if self.predicate_input:
            what += f" (on `{self.predicate_input}`)"
        return (
            f"control flow diverged at `{self.name}`: reference took {str(ref).lower()}, runtime "
            f"took {str(rt).lower()}; predicate {what} = {_show(self.reference_value[i])} vs "
            f"{_show(self.runtime_value[i])}"
        )

    def record(self) -> dict[str, Any]:
        return {
            "cond": self.name,
            "debug_handle": self.debug_handle,
            "predicate_op": self.predicate_op,
            "predicate_input": self.predicate_input,
            "reference_branch": self.reference_branch,
            "runtime_branch": self.runtime_branch,
            "reference_predicate_value": [_plain(v) for v in self.reference_value],
            "runtime_predicate_value": [_plain(v) for v in self.runtime_value],
            "flipped_samples": self.flipped_samples,
        }


def _plain(value: Any) -> Any:
    """A JSON-safe scalar: a one-element tensor's value, NaN/inf as strings, else its text."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, bool | int | float | None) else str(value)


def _show(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return "unknown" if value is None else str(value)


def cond_sites(gm: torch.fx.GraphModule) -> list[CondSite]:
    """Every top-level torch.cond node (nested conds are compared as one op, not looked into)."""
    sites = []
    for node in gm.graph.nodes:
        target = node.target
        if not (node.op == "call_function" and isinstance(target, torch._ops.HigherOrderOperator)):
            continue
        if target.name() != "cond" or len(node.args) != 4:
            continue
        pred, true_attr, false_attr, operands = node.args
        true_gm = getattr(gm, str(getattr(true_attr, "target", "")), None)
        false_gm = getattr(gm, str(getattr(false_attr, "target", "")), None)
        if not (
            isinstance(true_gm, torch.fx.GraphModule) and isinstance(false_gm, torch.fx.GraphModule)
        ):
            continue
        sites.append(
            CondSite(
                node,
                pred if isinstance(pred, torch.fx.Node) else None,
                tuple(operands),
                (true_gm, false_gm),
            )
        )
    return sites


def node_order(graph: torch.fx.Graph, sites: Sequence[CondSite]) -> list[torch.fx.Node]:
    """Top-level nodes in graph order, each cond's branch ops (true, then false) just before it."""
    by_node = {s.node: s for s in sites}
    order: list[torch.fx.Node] = []
    for node in graph.nodes:
        site = by_node.get(node)
        if site is not None:
            order.extend(site.branch_nodes(True) + site.branch_nodes(False))
        order.append(node)
    return order


def downstream(node: torch.fx.Node) -> set[torch.fx.Node]:
    """Every node that uses `node`'s value, directly or not (the cond itself included)."""
    seen, stack = {node}, [node]
    while stack:
        for user in stack.pop().users:
            if user not in seen:
                seen.add(user)
                stack.append(user)
    return seen


def run_branch(site: CondSite, taken: bool, operands: Sequence[Any]) -> dict[torch.fx.Node, Any]:
    """Every node value of one branch on these operand values (the reference for branch ops)."""
    interpreter = torch.fx.Interpreter(
        site.branches[0 if taken else 1], garbage_collect_values=False
    )
    with torch.no_grad():
        interpreter.run(*operands)
    return dict(interpreter.env)


def runtime_branch(
    site: CondSite, logged: Iterable[DebugHandle], runtime_predicate: Any
) -> bool | None:
    """The branch the runtime ran: whose ops it logged, else its logged predicate, else None."""
    handles = set(logged)
    took_true, took_false = (
        handles & site.branch_handles(True),
        handles & site.branch_handles(False),
    )
    if took_true and not took_false:
        return True
    if took_false and not took_true:
        return False
    if isinstance(runtime_predicate, torch.Tensor) and runtime_predicate.numel() == 1:
        return bool(runtime_predicate.item())
    return None


def predicate_source(site: CondSite) -> tuple[str, torch.fx.Node | None]:
    """The predicate op's name and, for a comparison, the float node it compared."""
    pred = site.predicate
    if pred is None:
        return "", None
    name = getattr(pred.target, "__name__", str(pred.target)).split(".")[0]
    first = pred.args[0] if pred.args else None
    if name in _COMPARISONS and isinstance(first, torch.fx.Node):
        return pred.name, first
    return pred.name, None


def is_getitem(node: torch.fx.Node) -> bool:
    return node.target is operator.getitem


def untaken_fault_warnings(
    sites: Sequence[CondSite], records: Sequence[CondRecord], fault: dict[str, Any] | None
) -> list[str]:
    """An injected fault inside a branch no sample ran changed nothing: say so."""
    if not fault:
        return []
    handle, name = fault.get("debug_handle"), fault.get("node")
    warnings = []
    for site, record in zip(sites, records, strict=True):
        for taken, label in ((True, "true"), (False, "false")):
            hit = [
                n
                for n in site.branch_nodes(taken)
                if (name and n.name == name)
                or (handle is not None and get_debug_handle(n) == int(handle))
            ]
            if hit and taken not in record.runtime_branch:
                warnings.append(
                    f"the injected fault on `{hit[0].name}` (the {label} branch of "
                    f"`{record.name}`) changed nothing: no sample took that branch"
                )
    return warnings
