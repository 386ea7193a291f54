"""The numeric gap of one captured step: its runtime outputs against the reference program run on
the inputs that step really had (its token and the runtime's own caches, from step_inputs.pt).

So a step's local gaps name the ops that add error at that step, with the cache the runtime
carried in; how error accumulates across steps is the KV cache's divergence (`cache_divergence`).
One step is compared at a time: memory follows one step's activations, not the generation's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.comparators import Comparator
from stages.analyze.compare.numeric_gap import GapRow, numeric_gap_and_flow
from stages.analyze.compare.runtime_outputs import runtime_outputs
from stages.analyze.compare.verdict import Verdict, decide
from stages.analyze.compare.verdict_budget import VerdictBudget
from stages.analyze.link.control_flow import CondRecord
from stages.analyze.link.linking import ProgramIndex
from stages.analyze.link.map_check import MapCheck
from stages.formats.etdump import ETDumpData, RunData
from stages.formats.float_reference import QParams


@dataclass(frozen=True)
class GapOptions:
    """How every step is compared and judged (the same as a plain run's analysis)."""

    comparators: Sequence[Comparator]
    gap_comparator: Comparator
    threshold: float
    budget: VerdictBudget
    tie_tolerance: float
    calibration: Sequence[Sequence[torch.Tensor]]  # the representative inputs lower calibrated on
    qparams: Mapping[str, QParams] = field(default_factory=dict)  # a PT2E program's, by node


@dataclass(frozen=True)
class StepGap:
    """One captured step's gap rows, cond records and verdict."""

    step: int
    rows: list[GapRow]
    flows: list[CondRecord]
    verdict: Verdict


def single_step_dump(dump: ETDumpData, block: RunData) -> ETDumpData:
    """An ETDump holding only `block`, as the one sample (index 0) of a plain analysis."""
    return replace(dump, run_data=[replace(block, bundled_input_index=0)])


def step_gap(
    step: int,
    block: RunData,
    inputs: tuple[torch.Tensor, ...],
    context: tuple[ETDumpData, bytes | memoryview, ProgramIndex, MapCheck | None, str],
    program: ExportedProgram,
    options: GapOptions,
) -> StepGap:
    """Compare one step's logged outputs and judge them as a plain run's are."""
    dump, buffer, index, map_check, where = context
    outputs = runtime_outputs(single_step_dump(dump, block), buffer, index, where, map_check)
    _, rows, flows = numeric_gap_and_flow(
        outputs,
        program,
        [inputs],
        options.comparators,
        options.tie_tolerance,
        index.precision,
        options.budget.floor_units,
        calibration=options.calibration,
        qparams=options.qparams,
        delegated={h for m in index.maps for h in m.delegated_handles},
    )
    verdict = decide(
        rows,
        options.gap_comparator,
        options.threshold,
        bool(rows),
        "" if rows else "no logged outputs in this step",
        flows,
        options.budget.margin,
    )
    return StepGap(step, rows, flows, verdict)


def step_label(step: int) -> str:
    """'prefill' for step 0, 'decode N' after it."""
    return "prefill" if step == 0 else f"decode {step}"


def verdict_record(gap: StepGap) -> dict[str, Any]:
    """The step's verdict in a few fields."""
    return {
        "step": gap.step,
        "status": gap.verdict.status,
        "diverged_outputs": gap.verdict.diverged_rows,
        "compared_outputs": sum(1 for r in gap.rows if r.accumulated),
    }
