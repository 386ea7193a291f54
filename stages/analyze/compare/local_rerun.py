"""The reference-fed re-run: a group's reference ops run on the runtime's own inputs (the
local gap), and the upstream ops whose runtime values were not logged."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

import torch

from stages.analyze.compare.expected_error import PrecisionEmulation, bit_identical
from stages.analyze.compare.gap.groups import GapGroup, is_getitem
from stages.handles.debug_handles import get_debug_handle


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
        known = set(group.unobserved_nodes)
        group.unobserved_nodes.extend(n for n in seen if n not in known)
        group.unobserved_nodes.sort(key=lambda n: graph_order.get(n.name, 0))


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


def _outside_value(
    n: torch.fx.Node,
    members: set[torch.fx.Node],
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
) -> Any:
    """A value the group reads from outside: the runtime's when it was logged, else the
    reference's."""
    if n in subst:
        return subst[n]
    source = n.args[0] if is_getitem(n) else None
    if isinstance(source, torch.fx.Node) and source in subst and source not in members:
        return subst[source][n.args[1]]
    return env[n]


def rerun(
    group: GapGroup,
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
    fixed: dict[torch.fx.Node, Any] | None = None,
    outputs: Sequence[torch.fx.Node] = (),
    emulation: PrecisionEmulation | None = None,
    upstream: Sequence[torch.fx.Node] = (),
    exact: Collection[torch.fx.Node] = (),
) -> tuple[Any, Any]:
    """The group's reference ops on the runtime's inputs: the anchor's value, and the value of
    the anchor's first argument (what an index op ranked). `fixed` values stand for member
    nodes (a cond's outputs are the runtime branch's outputs: its ops are compared one by one).
    With `emulation`, inputs, constants and op outputs are rounded to its precision; `upstream`
    ops (unobserved inputs, see `emulated_upstream`) are re-run before the group's own; `exact`
    ops' outputs are not rounded (ops the program runs in float)."""
    if upstream:
        group = replace(group, nodes=[*upstream, *group.nodes])
    members = set(group.nodes)
    local: dict[torch.fx.Node, Any] = {}
    weights = emulation.weights(members) if emulation is not None else set()

    def outside(n: torch.fx.Node) -> Any:
        return _outside_value(n, members, env, subst)

    def lookup(n: torch.fx.Node) -> Any:
        if n in local:
            return local[n]
        if n not in members:
            value = outside(n)
            if emulation is None or n in exact:
                return value
            return emulation.stored(n, value, weights)
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
            args = emulation.operands(node, args) if emulation and node not in exact else args
            local[node] = node.target(*args, **kwargs)  # type: ignore[operator]
            if emulation is not None and not is_getitem(node) and node not in exact:
                local[node] = emulation.rounded(node, local[node])
    if group.anchor is None:
        return None, None
    first = group.anchor.args[0] if group.anchor.args else None
    ranked = lookup(first) if isinstance(first, torch.fx.Node) else None
    if outputs:
        return [local[n] for n in outputs], ranked
    return local[group.anchor], ranked


# Longest unobserved chain the expected error re-runs with a group: beyond it, the group's own
# ops alone (a chain that long means the runtime logged almost nothing; re-running it per group
# would cost a program run each).
MAX_UPSTREAM_OPS = 256


def emulated_upstream(
    group: GapGroup, emulation: PrecisionEmulation
) -> tuple[list[torch.fx.Node], set[torch.fx.Node]]:
    """The unobserved ops whose error the group's local gap holds (its re-run takes their
    reference values), so its expected error emulates them too, and the ops of that re-run that
    stay exact. With the program's own quantize parameters (a PT2E program) an op they do not
    quantize runs in float; without them, an upstream op is known to be low precision when the
    lowered program delegated it (`emulation.delegated`), and every op of a delegated group's
    chain is emulated."""
    chain = group.unobserved_nodes
    quantized = emulation.qparams
    on_delegate = {n for n in chain if get_debug_handle(n) in emulation.delegated}
    if len(chain) > MAX_UPSTREAM_OPS or not (group.is_delegated or quantized or on_delegate):
        chain = []
    exact = {n for n in chain if quantized and n.name not in quantized}
    if not group.is_delegated:  # a portable op computes in float on what it is given
        if not quantized:  # the delegated ops of its chain at the precision, the rest in float
            exact |= {n for n in chain if n not in on_delegate}
        ops = [n for n in (*chain, *group.nodes) if quantized or n not in on_delegate]
        inside = set(chain) | set(group.nodes)
        read_by_delegate = {a for n in on_delegate for a in n.all_input_nodes}
        given = {a for n in ops for a in n.all_input_nodes if a not in inside}
        if not quantized:  # a value a delegated op also reads is stored at its precision
            given -= read_by_delegate
        exact |= {n for n in (*group.nodes, *given) if n.name not in quantized}
    return list(chain), exact
