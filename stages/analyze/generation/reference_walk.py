"""The reference generation, teacher-forced on the runtime's tokens: step s of the reference
takes the token the runtime chose at step s - 1 and the reference's own caches, so its logits and
caches show how far the runtime drifted by then, even after a token differs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram

from stages.export.reference_capture import program_outputs
from stages.formats.generation_signature import next_step_inputs


@dataclass(frozen=True)
class ReferenceStep:
    """One step of the reference: its inputs, next-token logits and updated caches."""

    step: int
    inputs: tuple[torch.Tensor, ...]
    logits: torch.Tensor  # [vocab], the last position's
    caches: tuple[torch.Tensor, ...]


def reference_steps(
    program: ExportedProgram,
    prompt: tuple[torch.Tensor, ...],
    steps: int,
    token_at: Callable[[int, torch.Tensor], int],
) -> Iterator[ReferenceStep]:
    """`steps` steps (the prefill first), step s + 1 fed `token_at(s, reference logits)` (the
    runtime's token); only the current step is held."""
    inputs = prompt
    for step in range(steps):
        outputs = program_outputs(program, inputs)
        yield ReferenceStep(step, inputs, outputs[0][0, -1], tuple(outputs[1:]))
        inputs = next_step_inputs(inputs, outputs, token_at(step, outputs[0][0, -1]))
