"""The exported program's reference values one node at a time, each dropped after its last reader.

The numeric gap reads a node's reference value when a later node consumes it and when a group of
runtime outputs is compared; keeping every value of the program at once costs the sum of all
activations. Here the analysis declares at which step each node is last read (`Liveness`), and
values leave the environment then, so memory stays near the largest few live activations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.expected_error import max_abs_ranges
from stages.export.reference_capture import flat_program_args


class ReferenceStepper(torch.fx.Interpreter):
    """Evaluates the program's graph node by node into `env`, which the caller prunes."""

    def __init__(self, program: ExportedProgram, inputs: Sequence[torch.Tensor]) -> None:
        super().__init__(program.graph_module, garbage_collect_values=False)
        self.env: dict[torch.fx.Node, Any] = {}
        args = self.graph.process_inputs(*flat_program_args(program, inputs))
        self.args_iter = iter(args)

    def step(self, node: torch.fx.Node) -> Any:
        """Evaluate one top-level node (its inputs must still be in `env`) and keep its value."""
        with torch.no_grad():
            value = self.run_node(node)
        self.env[node] = value
        return value


@dataclass
class Liveness:
    """Per node, the last step (position in the evaluation order) that reads its value."""

    last: dict[torch.fx.Node, int] = field(default_factory=dict)

    def read(self, nodes: Iterable[Any], step: int) -> None:
        """`nodes` (fx nodes; anything else is ignored) are read at `step`."""
        for node in nodes:
            if isinstance(node, torch.fx.Node) and self.last.get(node, -1) < step:
                self.last[node] = step

    def dying(self) -> dict[int, list[torch.fx.Node]]:
        """Per step, the nodes whose values may be dropped once that step is done."""
        by_step: dict[int, list[torch.fx.Node]] = {}
        for node, step in self.last.items():
            by_step.setdefault(step, []).append(node)
        return by_step


def graph_liveness(order: Sequence[torch.fx.Node]) -> Liveness:
    """Reads by the graph itself: each node at the step that produces it and the steps of its
    users in `order` (nodes outside `order`, e.g. branch placeholders, only where read)."""
    live = Liveness()
    for step, node in enumerate(order):
        live.read([node], step)
        live.read(node.all_input_nodes, step)
    return live


def max_abs_ranges_streamed(
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    ranges: dict[torch.fx.Node, float],
) -> None:
    """Per node, max |finite reference value| over `samples` (int8 calibration), computed while
    the program runs with its values freed after their last use."""
    for sample in samples:
        _RangeFolder(program.graph_module, ranges).run(*flat_program_args(program, sample))


class _RangeFolder(torch.fx.Interpreter):
    """Folds each node's value into `ranges` as it is produced (values are garbage collected)."""

    def __init__(self, module: torch.fx.GraphModule, ranges: dict[torch.fx.Node, float]) -> None:
        super().__init__(module, garbage_collect_values=True)
        self.ranges = ranges

    def run_node(self, n: torch.fx.Node) -> Any:
        with torch.no_grad():
            value = super().run_node(n)
        max_abs_ranges({n: value}, self.ranges)
        return value
