"""Run an exported program's ATen graph on inputs and keep every node's output.

Used by the lower stage (int8 calibration) and the analysis (reference intermediate outputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value


def flat_program_args(program: ExportedProgram, user_inputs: Sequence[torch.Tensor]) -> list[Any]:
    """Placeholder values in graph order: parameters, buffers, constants, then user inputs."""
    state = program.state_dict
    constants = program.constants
    values: list[Any] = []
    user = iter(user_inputs)
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            values.append(next(user))
        elif spec.target in state:
            # Detached like the lowered program's constants: ATen picks its matmul path by
            # requires_grad even under no_grad, and the two paths differ in the last bit.
            values.append(_detached(state[spec.target]))
        elif spec.target in constants:
            values.append(_detached(constants[spec.target]))
        else:
            raise KeyError(f"no value for program input {spec.arg.name} ({spec.target})")
    return values


class _Capture(torch.fx.Interpreter):
    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module)
        self.outputs: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if n.op == "call_function":
            self.outputs[n.name] = result
        return result


def capture_node_outputs(
    program: ExportedProgram, user_inputs: Sequence[torch.Tensor]
) -> tuple[dict[str, Any], Any]:
    """({node name: output} of the top-level graph, program outputs)."""
    interpreter = _Capture(program.graph_module)
    with torch.no_grad():
        result = interpreter.run(*flat_program_args(program, user_inputs))
    return interpreter.outputs, result


def program_outputs(
    program: ExportedProgram, user_inputs: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    """The graph's outputs on `user_inputs`, tensors only, in graph order: buffer mutations (if
    any) then the user outputs flattened, the same list the lowered program returns."""
    with torch.no_grad():
        result = torch.fx.Interpreter(program.graph_module).run(
            *flat_program_args(program, user_inputs)
        )
    leaves = result if isinstance(result, list | tuple) else (result,)
    return tuple(leaf.detach() for leaf in leaves if isinstance(leaf, torch.Tensor))
