"""Whether a lowered prefix program diverges: each output the runtime returned against the
reference's value, by the verdict's rule (observed error against the error the precision alone
should cost along the whole prefix, emulated from the same inputs, plus the floor and margin).

So a prefix whose error is what its precision accumulates passes, and the first prefix that
fails holds an op that itself computes wrongly (stages.analyze.compare.bisection).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.expected_error import (
    EXCESS_DB,
    PrecisionEmulation,
    constant_placeholders,
    error_budget,
    max_abs_ranges,
)
from stages.export.reference_capture import flat_program_args


@dataclass(frozen=True)
class PrefixJudgement:
    """Whether the prefix diverged, and its worst output's excess over expected error (dB)."""

    diverged: bool
    worst_excess_db: float
    worst_output: int


def _walk(
    program: ExportedProgram, sample: Sequence[torch.Tensor], emulation: PrecisionEmulation | None
) -> tuple[dict[torch.fx.Node, Any], list[Any]]:
    """Every node's value (emulated at the precision when given) and the program's outputs."""
    graph = program.graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    env = dict(zip(placeholders, flat_program_args(program, sample), strict=True))
    members = [n for n in graph.nodes if n.op == "call_function"]
    weights = emulation.weights(members) if emulation is not None else set()
    if emulation is not None:
        env = {n: emulation.stored(n, v, weights) for n, v in env.items()}
    outputs: list[Any] = []
    with torch.no_grad():
        for node in graph.nodes:
            if node.op == "call_function":
                args = torch.fx.node.map_arg(node.args, env.__getitem__)
                kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
                if emulation is not None:
                    args = emulation.operands(node, args)
                value = node.target(*args, **kwargs)
                env[node] = emulation.rounded(node, value) if emulation is not None else value
            elif node.op == "output":
                outputs = list(torch.fx.node.map_arg(node.args[0], env.__getitem__))
    return env, [v for v in outputs if isinstance(v, torch.Tensor)]


def expected_outputs(
    program: ExportedProgram, samples: Sequence[Sequence[torch.Tensor]], precision: str
) -> list[list[torch.Tensor]] | None:
    """Per sample, the program's outputs as its precision alone would compute them (int8 scales
    calibrated on these samples, as the backend calibrated); None at fp32 (nothing expected)."""
    emulation = PrecisionEmulation(precision, constant_placeholders(program))
    if not emulation.active:
        return None
    for sample in samples:
        max_abs_ranges(_walk(program, sample, None)[0], emulation.ranges)
    return [_walk(program, sample, emulation)[1] for sample in samples]


def _diverged_exactly(runtime: list[torch.Tensor], reference: list[torch.Tensor]) -> bool:
    return any(not torch.equal(r.to(f.dtype), f) for r, f in zip(runtime, reference, strict=True))


def judge_prefix(
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    references: Sequence[Sequence[torch.Tensor]],
    runtime: Sequence[Sequence[torch.Tensor]],
    precision: str,
    budget: tuple[float, float],
) -> PrefixJudgement:
    """Output by output over every sample: excess over expected error > margin (float), any
    mismatch (integer, bool); a missing or misshapen output diverges. `budget`: (margin, floor)."""
    margin, floor_units = budget
    expected = expected_outputs(program, samples, precision)
    worst, worst_index, diverged = -math.inf, -1, False
    for index in range(len(references[0])):
        ref = [sample[index] for sample in references]
        run = [sample[index] if index < len(sample) else None for sample in runtime]
        if any(
            r is None or tuple(r.shape) != tuple(f.shape) for r, f in zip(run, ref, strict=True)
        ):
            return PrefixJudgement(True, math.inf, index)
        got = [r.to(f.dtype) for r, f in zip(run, ref, strict=True) if r is not None]
        if not ref[0].is_floating_point():
            excess = math.inf if _diverged_exactly(got, ref) else -math.inf
        else:
            exp = [sample[index] for sample in expected] if expected is not None else None
            excess = error_budget(got, ref, exp, precision, floor_units)[EXCESS_DB]
        if excess > worst or worst_index < 0:
            worst, worst_index = excess, index
        diverged = diverged or excess > margin
    return PrefixJudgement(diverged, worst, worst_index)
