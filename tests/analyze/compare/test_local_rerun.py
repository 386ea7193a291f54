"""The local re-run: a group fed exactly the reference's inputs takes the reference's values
(its ops are not run again); any other input runs them on the runtime's values."""

from __future__ import annotations

from typing import Any

import torch

from stages.analyze.compare.gap_groups import GapGroup
from stages.analyze.compare.local_rerun import rerun


class _Counted:
    """An op that counts its calls (stands in for an expensive kernel)."""

    __name__ = "counted"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * 2.0 + 1.0


def _graph(op: _Counted) -> tuple[torch.fx.Graph, torch.fx.Node, torch.fx.Node]:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(op, (x,))
    graph.output(y)
    return graph, x, y


def _run(op: _Counted, runtime_input: torch.Tensor, reference_input: torch.Tensor) -> Any:
    _, x, y = _graph(op)
    env = {x: reference_input, y: reference_input * 2.0 + 1.0}
    group = GapGroup(handles=(1,), anchor=y, nodes=[y])
    local, _ = rerun(group, env, {x: runtime_input}, fixed={})  # as the graph walk calls it
    return local, env[y]


def test_a_group_fed_the_reference_inputs_takes_the_reference_values() -> None:
    op = _Counted()
    reference = torch.linspace(-1, 1, 7)
    local, expected = _run(op, reference.clone(), reference)  # same bits, another tensor
    assert op.calls == 0
    assert local is expected


def test_a_group_fed_other_inputs_runs_its_ops_on_them() -> None:
    op = _Counted()
    reference = torch.linspace(-1, 1, 7)
    runtime = reference + 1e-3
    local, _ = _run(op, runtime, reference)
    assert op.calls == 1
    assert torch.equal(local, runtime * 2.0 + 1.0)


def test_a_nan_input_is_never_taken_for_the_reference() -> None:
    op = _Counted()
    reference = torch.tensor([1.0, float("nan")])
    local, _ = _run(op, reference.clone(), reference)
    assert op.calls == 1
    assert torch.equal(local[:1], torch.tensor([3.0]))
