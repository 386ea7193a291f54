"""Which segment runtime.observe=bisect bisects, and the call: the partition that is the first
divergence and was compared as a whole, or, when the run logged no intermediate outputs at all
(ExecuTorch's ETDump holds no half tensors), the whole program."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.bisection import (
    BisectInputs,
    Bisection,
    PrefixLowerings,
    bisect_segment,
)
from stages.analyze.compare.gap.evaluation import Gaps
from stages.analyze.compare.verdict import NOT_EVALUATED, Verdict
from stages.analyze.compare.verdict_budget import VerdictBudget
from stages.analyze.link.linked_files import Linked
from stages.export.subgraph_cut import cut_ops
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handover.etrecord import etrecord_program

log = logging.getLogger(__name__)

# Where bisection writes its prefix programs, in the run dir.
BISECT_DIR = "bisect"
# summary.json key of the bisection's record.
BISECTION_KEY = "bisection"


@dataclass(frozen=True)
class Segment:
    """What is bisected: 'partition N' or 'program', and its op names in graph order."""

    scope: str
    partition_id: int | None
    ops: list[str]


def _ops_of(program: Any, handles: set[int]) -> list[str]:
    return [
        n.name
        for n in program.graph.nodes
        if n.op == "call_function" and n.meta.get(DEBUG_HANDLE_META) in handles
    ]


def _divergent_group(linked: Linked, program: Any, handles: set[int]) -> Segment | None:
    """The first divergence's group when its partitions were compared as a whole: one whole
    partition, or a group spanning several (handle sets that overlap across partitions)."""
    whole = linked.map_check.whole_partitions
    touched = [m for m in linked.index.maps if handles & set(m.delegated_handles)]
    if not touched or any(m.partition_id not in whole for m in touched):
        return None  # some partition logged its own ops' outputs: nothing hidden to bisect
    for m in touched:
        if set(m.delegated_handles) == handles:  # as sets: ExecuTorch repeats handles
            ops = _ops_of(program, handles)
            return Segment(f"partition {m.partition_id}", m.partition_id, ops)
    ids = ", ".join(str(m.partition_id) for m in touched)
    return Segment(f"group of partitions {ids}", None, _ops_of(program, handles))


def bisect_segment_of(
    linked: Linked, program: ExportedProgram, verdict: Verdict, found: Gaps
) -> Segment | None:
    """The whole partition that is the first divergence, or the whole program when nothing was
    logged to compare; None when neither (nothing to bisect)."""
    row = verdict.first_divergence
    if row is not None:
        return _divergent_group(linked, program, set(row.handles))
    if verdict.status != NOT_EVALUATED or found.not_evaluated is None or found.rows:
        return None
    graph = program.graph.nodes
    if any(isinstance(n.target, torch._ops.HigherOrderOperator) for n in graph):
        log.warning("[analyze] bisection: a program with control flow is not bisected")
        return None
    return Segment("program", None, [n.name for n in cut_ops(program)])


def observe_bisection(
    linked: Linked,
    verdict: Verdict,
    found: Gaps,
    budget: VerdictBudget,
    lowerings: PrefixLowerings | None,
    run_dir: Path,
) -> tuple[Segment, Bisection] | None:
    """Bisect the segment (when runtime.observe=bisect handed in `lowerings`), or None."""
    record = linked.inputs.etrecord
    if lowerings is None or record is None or budget.margin is None:
        return None
    program = linked.program or etrecord_program(record)
    segment = bisect_segment_of(linked, program, verdict, found)
    if segment is None:
        return None
    inputs = BisectInputs(
        program,
        list(record.representative_inputs),
        linked.index.precision,
        (budget.margin, budget.floor_units),
        run_dir / BISECT_DIR,
        lowerings,
    )
    log.info("[analyze] bisection of %s (%d ops)", segment.scope, len(segment.ops))
    # A partition is the first divergence already; a whole program is only known to have
    # logged nothing, so its whole is lowered first (a clean run costs one lowering).
    return segment, bisect_segment(inputs, segment.ops, check_whole=segment.partition_id is None)
