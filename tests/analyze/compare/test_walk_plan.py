"""The walk keeps a value alive while a group's expected error may still re-run the unobserved
ops after it from that value (it was released once its graph reader ran, and the expected error
fell back to the floor: a false FAIL on int8 programs where a tap was left out)."""

from __future__ import annotations

import torch

from stages.analyze.compare.gap.groups import GapGroup
from stages.analyze.compare.walk_plan import plan_walk


def _chain() -> tuple[list[torch.fx.Node], dict[torch.fx.Node, int]]:
    """x -> a -> b -> c -> d: a and d are observed (group anchors), b and c are not."""
    graph = torch.fx.Graph()
    node = graph.placeholder("x")
    for name in "abcd":
        node = graph.call_function(torch.relu, (node,))
        node.name = name
    graph.output(node)
    order = list(graph.nodes)[:-1]
    return order, {n: i for i, n in enumerate(order)}


def _plan(anchored: str) -> tuple[dict[int, list[torch.fx.Node]], dict[str, int]]:
    """The plan with a group anchored at each op named in `anchored`; (dying, step by name)."""
    order, topo = _chain()
    groups = [
        GapGroup(handles=(i + 1,), anchor=n, nodes=[n])
        for i, n in enumerate(n for n in order if n.name in anchored)
    ]
    plan = plan_walk(order, topo, [], groups, release_values=True)
    return plan.dying, {n.name: topo[n] for n in order}


def _died_at(dying: dict[int, list[torch.fx.Node]], name: str) -> int:
    return next(step for step, nodes in dying.items() for n in nodes if n.name == name)


def test_the_input_of_an_unobserved_chain_lives_until_the_group_after_it_is_compared() -> None:
    dying, step = _plan("ad")
    # d's group is compared at d's step; its expected error re-runs b and c from a's value
    assert _died_at(dying, "a") >= step["d"]
    assert _died_at(dying, "b") >= step["d"]


def test_an_observed_input_ends_the_chain() -> None:
    dying, step = _plan("acd")
    assert _died_at(dying, "a") < step["d"]  # nothing after c needs it
