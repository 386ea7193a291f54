"""The reference-fed re-run: a group's reference ops run on the runtime's own inputs (the
local gap), and the upstream ops whose runtime values were not logged."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch

from stages.analyze.compare.expected_error import PrecisionEmulation, bit_identical
from stages.analyze.compare.gap_groups import GapGroup, is_getitem


def note_unobserved(group: GapGroup, subst: Collection[torch.fx.Node]) -> None:
    """Record the ops upstream of the group whose runtime values were not given: its direct op
    inputs that were not logged, and their own unlogged producers (see GapGroup)."""
    members = set(group.nodes)

    def observed(node: torch.fx.Node) -> bool:
        source = node.args[0] if is_getitem(node) else node
        return node.op != "call_function" or node in subst or source in subst

    stack = [a for n in group.nodes for a in n.all_input_nodes if a not in members]
    seen: set[torch.fx.Node] = set()
    while stack:
        node = stack.pop()
        if node in seen or observed(node):
            continue
        seen.add(node)
        if not is_getitem(node) and node.name not in group.unobserved_inputs:
            group.unobserved_inputs.append(node.name)
        stack.extend(node.all_input_nodes)
    if seen:
        graph_order = {n.name: i for i, n in enumerate(next(iter(seen)).graph.nodes)}
        group.unobserved_inputs.sort(key=lambda name: graph_order.get(name, 0))


def _same_value(runtime: Any, reference: Any) -> bool:
    """The very object, or tensors of one dtype and shape with the same bits (NaN: never)."""
    if runtime is reference:
        return True
    tensors = isinstance(runtime, torch.Tensor) and isinstance(reference, torch.Tensor)
    return tensors and bit_identical([runtime], [reference])


def _reference_inputs(
    group: GapGroup,
    members: set[torch.fx.Node],
    outside: Callable[[torch.fx.Node], Any],
    env: dict[torch.fx.Node, Any],
) -> bool:
    """Every value the group reads from outside is the reference's, and the reference still
    holds every member's value."""
    if any(node not in env for node in group.nodes):
        return False
    inputs = {a for n in group.nodes for a in n.all_input_nodes if a not in members}
    return all(node in env and _same_value(outside(node), env[node]) for node in inputs)


def rerun(
    group: GapGroup,
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
    fixed: dict[torch.fx.Node, Any] | None = None,
    outputs: Sequence[torch.fx.Node] = (),
    emulation: PrecisionEmulation | None = None,
) -> tuple[Any, Any]:
    """The group's reference ops on the runtime's inputs: the anchor's value, and the value of
    the anchor's first argument (what an index op ranked). `fixed` values stand for member
    nodes (a cond's outputs are the runtime branch's outputs: its ops are compared one by one).
    With `emulation`, inputs, constants and op outputs are rounded to its precision."""
    members = set(group.nodes)
    local: dict[torch.fx.Node, Any] = {}
    weights = emulation.weights(members) if emulation is not None else set()

    def outside(n: torch.fx.Node) -> Any:
        if n in subst:
            return subst[n]
        source = n.args[0] if is_getitem(n) else None
        if isinstance(source, torch.fx.Node) and source in subst and source not in members:
            return subst[source][n.args[1]]
        return env[n]

    def lookup(n: torch.fx.Node) -> Any:
        if n in local:
            return local[n]
        if n not in members:
            value = outside(n)
            return emulation.stored(n, value, weights) if emulation is not None else value
        return env[n]

    stood_in = fixed is not None and any(node in fixed for node in group.nodes)
    if emulation is None and not stood_in and _reference_inputs(group, members, outside, env):
        # The runtime fed the group exactly the reference's inputs: its ops would give the
        # reference's values again (and a random op its own draw), so they are not re-run.
        local = {node: env[node] for node in group.nodes}
    with torch.no_grad():
        for node in group.nodes:
            if node in local:
                continue
            if fixed is not None and node in fixed:
                local[node] = fixed[node]
                continue
            args = torch.fx.node.map_arg(node.args, lookup)
            kwargs = torch.fx.node.map_arg(node.kwargs, lookup)
            local[node] = node.target(*args, **kwargs)  # type: ignore[operator]
            if emulation is not None and not is_getitem(node):
                local[node] = emulation.rounded(node, local[node])
    if group.anchor is None:
        return None, None
    first = group.anchor.args[0] if group.anchor.args else None
    ranked = lookup(first) if isinstance(first, torch.fx.Node) else None
    if outputs:
        return [local[n] for n in outputs], ranked
    return local[group.anchor], ranked
