"""Numeric gap: runtime intermediate outputs against the exported ATen program, by debug handle.

Runtime outputs (operators and delegate identifiers) are grouped by overlapping debug-handle
sets; a group compares its last op's output (accumulated gap), and also re-runs its reference
ops on the runtime's own inputs to the group (local gap): the op that introduces error shows a
local gap, ops that only carry it do not."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.comparators import Comparator
from stages.analyze.compare.expected_error import PrecisionEmulation, constant_placeholders
from stages.analyze.compare.gap.control_flow import cond_record, mark_flips
from stages.analyze.compare.gap.groups import GapGroup, RuntimeOutput, anchor_finder, build_groups
from stages.analyze.compare.gap.rows import GapRow, Slot, build_rows, group_slots, say_fallbacks
from stages.analyze.compare.reference_stream import max_abs_ranges_streamed
from stages.analyze.compare.sample_walk import SampleWalk, WalkStats, note_peak
from stages.analyze.compare.walk_plan import plan_walk
from stages.analyze.link.control_flow import CondRecord, cond_sites, node_order
from stages.formats.float_reference import QParams
from stages.handles.debug_handles import DebugHandle
from stages.progress_display import ProgressDisplay


def compute_numeric_gap(
    outputs: list[RuntimeOutput],
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    comparators: Sequence[Comparator],
    tie_tolerance: float = 0.0,
) -> tuple[list[GapGroup], list[GapRow]]:
    """Groups in topological order and one row per compared output (see `numeric_gap_and_flow`)."""
    groups, rows, _ = numeric_gap_and_flow(outputs, program, samples, comparators, tie_tolerance)
    return groups, rows


def numeric_gap_and_flow(
    outputs: list[RuntimeOutput],
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    comparators: Sequence[Comparator],
    tie_tolerance: float = 0.0,
    precision: str | None = None,
    floor_units: float = 0.0,
    stats: WalkStats | None = None,
    release_values: bool = True,
    calibration: Sequence[Sequence[torch.Tensor]] | None = None,
    qparams: Mapping[str, QParams] | None = None,
    delegated: Collection[DebugHandle] = (),
) -> tuple[list[GapGroup], list[GapRow], list[CondRecord]]:
    """Groups in topological order, one row per compared output, and one record per cond.
    Float outputs go through the comparators; integer and bool outputs are counted exactly, index
    outputs with the tie rule at `tie_tolerance` (`exact_compare`); a cond's branch ops against
    the same branch of the reference. With `precision`, float rows get an error budget: observed
    local error against that precision's own (expected_error; `qparams`, `delegated`: _emulation).
    The program is walked once (a progress display per op), every sample in step, in topological
    order: a group is compared as soon as its last node is evaluated, and each reference value is
    released after its last reader (`release_values=False` keeps them all, to check that
    releasing changes nothing); `stats` receives how many values were held at once."""
    graph = program.graph_module.graph
    sites = cond_sites(program.graph_module)
    records = [cond_record(s) for s in sites]
    record_of = {site.node: record for site, record in zip(sites, records, strict=True)}
    order = node_order(graph, sites)
    groups, topo = build_groups(outputs, graph, order)
    emulation = _emulation(program, (samples, calibration), precision, qparams, delegated)
    walks = _sample_walks(program, samples, outputs, groups)
    plan = plan_walk(order, topo, sites, groups, release_values)
    options = (comparators, tie_tolerance, emulation, floor_units)
    rows: list[GapRow] = []
    noted: set[int] = set()
    with ProgressDisplay(f"analyze: ops x {len(walks)} sample(s)", len(order)) as progress:
        for step, node in enumerate(order):
            for site in plan.starts.get(step, ()):
                for walk in walks:
                    walk.branch(site, record_of[site.node])
            if node.graph is graph:
                for walk in walks:
                    walk.evaluate(node)
            if stats is not None:
                note_peak(stats, walks)
            for gi in plan.ready.get(step, ()):
                slots = group_slots(gi, groups[gi], walks, noted, (emulation, floor_units))
                rows += build_rows(groups, topo, slots, *options)
            for released in plan.dying.get(step, ()):
                for walk in walks:
                    walk.release(released)
            progress.advance()
    missing = {  # a handle with no node of the program (e.g. a nested cond)
        (gi, 0): Slot(status="no_reference") for gi, g in enumerate(groups) if g.anchor is None
    }
    rows += build_rows(groups, topo, missing, *options)
    rows.sort(key=lambda r: (r.group, r.output_index))
    say_fallbacks(rows, precision)
    mark_flips(rows, groups, sites, records)
    return groups, rows, records


def _sample_walks(
    program: ExportedProgram,
    samples: Sequence[Sequence[torch.Tensor]],
    outputs: list[RuntimeOutput],
    groups: list[GapGroup],
) -> list[SampleWalk]:
    """One walk per sample that logged outputs and has representative inputs, in sample order."""
    group_of: dict[DebugHandle, int] = {h: i for i, g in enumerate(groups) for h in g.handles}
    by_sample: dict[int, list[RuntimeOutput]] = {}
    for out in outputs:
        by_sample.setdefault(out.sample, []).append(out)
    anchor_of = anchor_finder(groups, group_of)
    return [
        SampleWalk(program, samples[sample], sample_outputs, anchor_of, groups, group_of, sample)
        for sample, sample_outputs in sorted(by_sample.items())
        if sample < len(samples)
    ]


def _emulation(
    program: ExportedProgram,
    samples: tuple[Sequence[Sequence[torch.Tensor]], Sequence[Sequence[torch.Tensor]] | None],
    precision: str | None,
    qparams: Mapping[str, QParams] | None = None,
    delegated: Collection[DebugHandle] = (),
) -> PrecisionEmulation | None:
    """The precision emulation of the expected error; int8 scales from the reference values
    (and a PT2E program's own `qparams`, by node, when given); the handles the lowered program
    `delegated`, whose unlogged ops a group's expected error emulates upstream of it
    (local_rerun.emulated_upstream)."""
    if precision is None:
        return None
    emulation = PrecisionEmulation(precision, constant_placeholders(program))
    emulation.delegated = frozenset(delegated)
    if qparams:
        emulation.qparams = qparams
    if precision == "int8":  # as the lower stage calibrates: over every representative input
        evaluated, calibration = samples  # scales from the calibration samples, if any
        calibrated_on = evaluated if calibration is None else calibration
        max_abs_ranges_streamed(program, calibrated_on, emulation.ranges)
    return emulation
