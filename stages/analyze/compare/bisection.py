"""runtime.observe=bisect: the first divergent op inside a segment the runtime logged no values in
(a partition compared as a whole, or a whole program whose run logged no intermediate outputs).

Cut after op k: the segment's ops 0..k lowered on the run's backend (by the callable the
pipeline hands in: the lower and run stages, through the stage cache), fed the reference's values
of the segment's inputs, every value the prefix hands on compared with the reference by the
verdict's rule (stages.analyze.compare.prefix_judgement). A binary search finds the smallest k
whose prefix diverges in about log2(N) lowerings: op k then computes wrongly while everything
before it stays within what the precision accumulates.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.prefix_judgement import PrefixJudgement, judge_prefix
from stages.export.prefix_cut import PrefixProgram, write_prefix
from stages.formats.artifacts import ArtifactName
from stages.handover.exported_program import load_exported_program
from stages.handover.samples import load_samples

log = logging.getLogger(__name__)

# (cut directory, original op name -> its name in the cut) -> (the cut's run_outputs.pt,
# whether its lowering was reused from the stage cache).
PrefixLowerings = Callable[[Path, dict[str, str]], tuple[Path, bool]]
# summary.json's first-divergence value of `found_by` for an op bisection named.
FOUND_BY = "bisection"


@dataclass
class Bisection:
    """What a bisection found: the op (None: none could be told), its lowerings, each cut."""

    segment: list[str]
    op: str | None = None
    lowerings: int = 0
    reused: int = 0  # lowerings the stage cache held already
    cuts: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def record(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "found_by": FOUND_BY,
            "lowerings": self.lowerings,
            "lowerings_reused": self.reused,
            "segment_ops": len(self.segment),
            "cuts": self.cuts,
            "note": self.note,
        }


@dataclass(frozen=True)
class BisectInputs:
    """What a bisection needs besides the segment: the reference program and its samples, the
    run's precision, (margin, floor units), where cuts go, and how a cut is lowered and run."""

    program: ExportedProgram
    samples: list[Any]
    precision: str
    budget: tuple[float, float]
    work_dir: Path
    lower_and_run: PrefixLowerings


def _judge(
    inputs: BisectInputs, segment: list[torch.fx.Node], k: int
) -> tuple[PrefixJudgement, bool]:
    """Cut after op k, lower and run it, judge its outputs; and whether the lowering was reused."""
    directory = inputs.work_dir / f"prefix-{k:04d}-{segment[k].name}"
    cut: PrefixProgram = write_prefix(inputs.program, inputs.samples, segment, k, directory)
    outputs, reused = inputs.lower_and_run(directory, cut.names)
    program = load_exported_program(directory / ArtifactName.EXPORTED_PROGRAM)
    return judge_prefix(
        program,
        load_samples(directory / ArtifactName.INPUTS),
        load_samples(directory / ArtifactName.REFERENCE_OUTPUTS),
        load_samples(outputs),
        inputs.precision,
        inputs.budget,
    ), reused


def search(n: int, diverges: Callable[[int], bool], check_whole: bool = False) -> int | None:
    """The smallest k in [0, n) with diverges(k), assuming a prefix that diverges stays so; the
    whole segment (k = n-1) is checked first with `check_whole`, else assumed to diverge and
    checked only when the search ends there; None when it does not diverge at all."""
    if check_whole and not diverges(n - 1):
        return None
    low, high = -1, n - 1  # diverges(low) is False (no op), diverges(high) assumed
    while high - low > 1:
        middle = (low + high) // 2
        if diverges(middle):
            high = middle
        else:
            low = middle
    if high == n - 1 and not diverges(high):
        return None
    return high


def bisect_segment(
    inputs: BisectInputs, names: Sequence[str], check_whole: bool = False
) -> Bisection:
    """The first op of `names` (in graph order) whose prefix diverges, with the lowerings spent
    (`check_whole`: the whole segment is not known to diverge: lowered first)."""
    wanted = set(names)
    segment = [
        n
        for n in inputs.program.graph.nodes
        if n.op == "call_function" and n.name in wanted and n.target is not operator.getitem
    ]
    found = Bisection([n.name for n in segment])
    judged: dict[int, PrefixJudgement] = {}

    def diverges(k: int) -> bool:
        if k not in judged:
            judged[k], reused = _judge(inputs, segment, k)
            found.lowerings += 1
            found.reused += int(reused)
            found.cuts.append(_cut_record(segment[k].name, k, judged[k]))
            log.info("[analyze] bisection: ops 0..%d (%s): %s", k, segment[k].name, judged[k])
        return judged[k].diverged

    if not segment:
        found.note = "no op of the segment is in the reference program: nothing to bisect"
        return found
    try:
        k = search(len(segment), diverges, check_whole)
    except Exception as exc:  # a prefix the exporter or backend cannot take: say so, go on
        log.warning("[analyze] bisection stopped: %s: %s", type(exc).__name__, exc)
        found.note = (
            f"bisection stopped after {found.lowerings} lowerings: a prefix could not be cut, "
            f"lowered or run ({type(exc).__name__}: {str(exc)[:300]}); the analysis stands "
            "without it"
        )
        return found
    found.op = segment[k].name if k is not None else None
    found.note = _note(found, [n.name for n in segment[: (k or 0) + 1]], k, check_whole)
    return found


def _cut_record(op: str, k: int, verdict: PrefixJudgement) -> dict[str, Any]:
    """One judged cut, for summary.json's `bisection.cuts`."""
    excess = verdict.worst_excess_db
    return {
        "after_op": op,
        "ops": k + 1,
        "diverged": verdict.diverged,
        "worst_excess_db": excess if math.isfinite(excess) else str(excess),
    }


def _note(found: Bisection, prefix: list[str], k: int | None, check_whole: bool) -> str:
    """What the search concluded, in a sentence."""
    if k is None and check_whole:
        return (
            "the segment does not diverge when fed the reference's inputs: its outputs stay "
            "within the error its precision should cost"
        )
    if k is None:
        return (
            "no prefix of the segment diverges when fed the reference's inputs: its divergence "
            "comes from the values it was fed, not from an op inside it"
        )
    said = f"found by bisection, {found.lowerings} lowerings"
    if k == 0:
        return f"{said}: the segment's first op {found.op} alone diverges"
    return (
        f"{said}: ops up to {prefix[-2]} stay within the error the precision accumulates; "
        f"with {found.op} the prefix diverges"
    )
