"""Split the exported graph into delegate partitions; keep every rejected op and its reason.

Partitions are maximal runs of supported ops in topological order: a contiguous run of a
topological order is always convex, so no partition depends on itself through an operator call.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from stages.backends.backend_api import BackendDetails, PartitionGraph, Rejection
from stages.handles.debug_handles import DEBUG_HANDLE_META


@dataclass(frozen=True)
class PartitionResult:
    """Which nodes each partition takes, and which ops were left out and why."""

    partitions: list[list[torch.fx.Node]]
    rejected: list[Rejection]


KEPT_OFF_REASON = "kept off the delegate by backend.keep_off"


def _reason(
    node: torch.fx.Node, backend: BackendDetails, keep_off: frozenset[str] = frozenset()
) -> str | None:
    if node.name in keep_off:
        return KEPT_OFF_REASON
    if isinstance(node.target, torch._ops.HigherOrderOperator):
        return f"control flow ({node.target.name()}) runs on the portable runtime"
    return backend.unsupported_reason(node)


def partition_program(
    program: ExportedProgram, backend: BackendDetails, keep_off: frozenset[str] = frozenset()
) -> PartitionResult:
    """Greedy contiguous partitioning of the top-level graph; `keep_off` nodes stay out."""
    partitions: list[list[torch.fx.Node]] = []
    owner: dict[torch.fx.Node, int] = {}
    rejected: list[Rejection] = []
    current: list[torch.fx.Node] = []

    def close() -> None:
        nonlocal current
        if current:
            for node in current:
                owner[node] = len(partitions)
            partitions.append(current)
            current = []

    for node in program.graph.nodes:
        if node.op != "call_function":
            if node.op == "output":
                close()
            continue
        if node.target is operator.getitem:
            source = node.args[0]
            if source in current:
                current.append(node)
            elif isinstance(source, torch.fx.Node) and source in owner:
                partitions[owner[source]].append(node)
                owner[node] = owner[source]
            continue
        reason = _reason(node, backend, keep_off)
        if reason is None:
            current.append(node)
        else:
            close()
            rejected.append(
                Rejection(node.name, str(node.target), node.meta.get(DEBUG_HANDLE_META), reason)
            )
    close()
    return PartitionResult(partitions, rejected)


def constant_tensors(program: ExportedProgram) -> dict[str, torch.Tensor]:
    """Placeholder node name → tensor, for parameters, buffers and lifted constants."""
    tensors: dict[str, torch.Tensor] = {}
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT or spec.target is None:
            continue
        value = program.state_dict.get(spec.target)
        if value is None:
            value = program.constants.get(spec.target)
        if isinstance(value, torch.Tensor):
            tensors[spec.arg.name] = value.detach()
    return tensors


def partition_graph(
    partition_id: int,
    nodes: list[torch.fx.Node],
    constants: dict[str, torch.Tensor],
    calibration: dict[str, float],
    keep_float: frozenset[str] = frozenset(),
) -> PartitionGraph:
    """The inputs a partition reads from outside, the values it gives back, its weights."""
    members = set(nodes)
    inputs: list[torch.fx.Node] = []
    used: dict[str, torch.Tensor] = {}
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg in members:
                continue
            if arg.op == "placeholder" and arg.name in constants:
                used[arg.name] = constants[arg.name]
            elif arg not in inputs:
                inputs.append(arg)
    outputs = []
    for node in nodes:
        val = node.meta.get("val")
        if isinstance(val, list | tuple) and node.target is not operator.getitem:
            continue  # a multi-output op is read through its getitems
        if any(user not in members for user in node.users):
            outputs.append(node)
    kept = frozenset(n.name for n in nodes) & keep_float
    return PartitionGraph(partition_id, nodes, inputs, outputs, used, calibration, kept)


def summarize_rejections(rejected: list[Rejection]) -> str:
    """One line: how many ops were left out, counted by reason (the list is in lowering.json)."""
    counts: dict[str, int] = {}
    for rejection in rejected:
        counts[rejection.reason] = counts.get(rejection.reason, 0) + 1
    by_reason = "; ".join(
        f"{count} × {reason}" for reason, count in sorted(counts.items(), key=lambda kv: -kv[1])
    )
    return f"{len(rejected)} ops left out of delegation ({by_reason})"
