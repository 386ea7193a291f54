"""Numeric gap rows: what each group output collects over the samples (runtime, reference,
local and emulated values), then one compared row per output."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.analyze.compare.comparators import Comparator
from stages.analyze.compare.expected_error import (
    ACCUMULATED_DB,
    PrecisionEmulation,
    error_budget,
    variation_snr,
)
from stages.analyze.compare.gap.compare import output_pairs, pair_status, reshapes_only, rule_for
from stages.analyze.compare.gap.groups import GapGroup, Value
from stages.analyze.compare.gap.sample_stats import (
    SampleFacts,
    is_systematic,
    sample_facts,
    summarize,
)
from stages.analyze.compare.local_rerun import emulated_upstream, note_unobserved, rerun
from stages.analyze.compare.sample_walk import SampleWalk
from stages.analyze.compare.stand_ins import multi_output_nodes
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier
from stages.log_details import log_file_only

log = logging.getLogger(__name__)
_details = log_file_only(__name__)  # per row: the log file; the terminal gets one line


@dataclass
class GapRow:
    """One compared output of one group (multi-output ops give one row per output)."""

    group: int
    topo_index: int
    output_index: int
    handles: tuple[DebugHandle, ...]
    identifiers: list[DelegateIdentifier]
    backend: str
    is_delegated: bool
    status: str
    runtime_shape: tuple[int, ...] | None = None
    reference_shape: tuple[int, ...] | None = None
    runtime_dtype: str = ""
    accumulated: dict[str, float] = field(default_factory=dict)
    local: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    comparison: str = "float"  # "float" (comparators), "exact" (int/bool), "index" (tie rule)
    follows_flip: str = ""  # the cond whose branch flipped upstream of this output, if any
    unobserved_inputs: tuple[str, ...] = ()  # see GapGroup.unobserved_inputs
    # Observed vs expected local error (stages/analyze/compare/expected_error.py), float rows.
    budget: dict[str, float] = field(default_factory=dict)
    expected_fallback: str = ""  # why the expected error is only the floor (its re-run failed)
    # Float rows judged over the samples one by one (gap/sample_stats.py): medians, worsts, the
    # systematic part's coefficients; whether that part exceeds its bound; each sample's local
    # SNR in dB (accumulated where there is no local re-run), for the report's plot.
    per_sample: dict[str, float] = field(default_factory=dict)
    systematic: bool = False
    sample_snr: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class Slot:
    """What one group output collects over the samples before it is compared."""

    status: str = "ok"
    rt: list[torch.Tensor] = field(default_factory=list)
    ref: list[torch.Tensor] = field(default_factory=list)
    loc: list[torch.Tensor] = field(default_factory=list)
    ranked: list[Any] = field(default_factory=list)  # what an index op ranked (reference)
    ranked_loc: list[Any] = field(default_factory=list)  # ... and in the local re-run
    exp: list[torch.Tensor] = field(default_factory=list)  # local re-run at the emulated precision
    exp_failed: str = ""  # why that re-run failed (the expected error then falls to the floor)
    shape: tuple[Any, Any] | None = None
    dtype: str = ""
    facts: list[SampleFacts] = field(default_factory=list)  # a few floats per float sample


def collect_group(
    slots: dict[tuple[int, int], Slot],
    gi: int,
    group: GapGroup,
    runtime: Value,
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
    fixed: dict[torch.fx.Node, Any] | None = None,
    emulation: PrecisionEmulation | None = None,
    sample: tuple[int, float] = (0, 0.0),
) -> None:
    """One sample's runtime output of a group, paired with its reference and local values (and
    the local values at the emulated precision, when `emulation` is active); `sample`: its
    index and the floor units its per-sample facts are judged with."""
    anchor = group.anchor
    if anchor is None:  # no reference node (ops inside a cond branch): rows say no_reference
        return
    reference = env.get(anchor)
    several = multi_output_nodes(group, runtime, reference)
    if several:  # each output of the call against the node it is
        reference = [env.get(n) for n in several]
    reshaped = reshapes_only(anchor) and not several
    pairs, status = output_pairs(runtime, reference, reshaped)
    first = anchor.args[0] if anchor.args else None
    ranked = env.get(first) if isinstance(first, torch.fx.Node) else None
    ranked_loc = None
    try:
        local_ref, ranked_loc = rerun(group, env, subst, fixed, several)
        local_pairs = {i: b for i, _, b in output_pairs(runtime, local_ref, reshaped)[0]}
    except Exception as exc:  # a reference op refusing runtime inputs is a finding
        local_pairs, status = {}, f"local_rerun_failed: {type(exc).__name__}"
    expected_pairs, failed = _expected_pairs(group, env, subst, fixed, emulation, runtime, several)
    if not pairs:
        slots.setdefault((gi, 0), Slot(status=status))
    for oi, rt, ref in pairs:
        slot = slots.setdefault((gi, oi), Slot())
        row_status = status if status != "ok" else pair_status(rt, ref)
        slot.shape = (tuple(rt.shape), tuple(ref.shape) if ref is not None else None)
        slot.dtype = str(rt.dtype).removeprefix("torch.")
        if row_status != "ok":
            slot.status = row_status
            continue
        slot.rt.append(rt)
        slot.ref.append(ref)
        slot.ranked.append(ranked)
        local = local_pairs.get(oi)
        if isinstance(local, torch.Tensor) and tuple(local.shape) == tuple(rt.shape):
            slot.loc.append(local)
            slot.ranked_loc.append(ranked_loc)
        emulated = expected_pairs.get(oi)
        if isinstance(emulated, torch.Tensor) and tuple(emulated.shape) == tuple(rt.shape):
            slot.exp.append(emulated)
        else:
            emulated = None
        slot.exp_failed = slot.exp_failed or failed
        emulating = bool(expected_pairs) or bool(failed)  # else the op runs in float32
        _note_facts(slot, (rt, ref, local, emulated), emulation, sample, emulating)


def _note_facts(
    slot: Slot,
    values: tuple[torch.Tensor, torch.Tensor, Any, torch.Tensor | None],
    emulation: PrecisionEmulation | None,
    sample: tuple[int, float],
    emulating: bool,
) -> None:
    """A float sample's few floats (gap/sample_stats.py) from its runtime, reference, local and
    emulated values; the tensors themselves are not kept for it."""
    rt, ref, local, emulated = values
    if not rt.is_floating_point():
        return
    judged = _judged(emulation, sample[1], emulating and emulated is None)
    rerun_value = local if isinstance(local, torch.Tensor) and local.shape == rt.shape else None
    slot.facts.append(sample_facts(sample[0], (rt, ref), rerun_value, emulated, judged))


def _judged(
    emulation: PrecisionEmulation | None, floor_units: float, missing: bool
) -> tuple[str, float] | None:
    """(precision, floor units) a sample's error is budgeted with; None without a precision or
    when its emulated re-run is missing (its expected error is unknown)."""
    if emulation is None or missing:
        return None
    return emulation.precision, floor_units


def _expected_pairs(
    group: GapGroup,
    env: dict[torch.fx.Node, Any],
    subst: dict[torch.fx.Node, Any],
    fixed: dict[torch.fx.Node, Any] | None,
    emulation: PrecisionEmulation | None,
    runtime: Value,
    outputs: Sequence[torch.fx.Node] = (),
) -> tuple[dict[int, Any], str]:
    """Per output index, the group's local re-run at the emulated precision (none at fp32),
    its unobserved upstream ops included (their error is in the observed local gap too); and
    why that re-run failed, if it did (the rows then say so: their budget is only the floor)."""
    if emulation is None or not emulation.active:
        return {}, ""
    upstream, exact = emulated_upstream(group, emulation)
    if not (group.is_delegated or upstream):
        return {}, ""
    try:
        emulated, _ = rerun(group, env, subst, fixed, outputs, emulation, upstream, exact)
    except Exception as exc:  # any op of any program: reported per row, never fatal
        return {}, f"{type(exc).__name__}: {str(exc)[:200]}"
    pairs = output_pairs(runtime, emulated, reshapes_only(group.anchor))[0]
    return {i: b for i, _, b in pairs}, ""


def _said_fallback(row: GapRow, slot: Slot, group: GapGroup, precision: str) -> None:
    """Note that a row's expected error is only the precision's floor, and why (the log file
    gets a line per row; the terminal one line per comparison, `say_fallbacks`)."""
    if not slot.exp_failed:
        return
    row.expected_fallback = slot.exp_failed
    ops = "+".join(n.name for n in group.nodes) or str(list(group.handles))
    _details.info(
        "numeric_gap: the expected error of %s at %s could not be computed, so the verdict does "
        "not judge it (not evaluated): the emulated re-run failed (%s)",
        ops,
        precision,
        slot.exp_failed,
    )


def say_fallbacks(rows: Sequence[GapRow], precision: str | None) -> None:
    """One warning for every row whose expected error fell back to the floor: how many, and
    their distinct reasons (each row is in the log file and summary.json `expected_fallback`)."""
    fallen = [r for r in rows if r.expected_fallback]
    if not fallen:
        return
    reasons = list(dict.fromkeys(r.expected_fallback for r in fallen))
    shown = "; ".join(reasons[:2]) + (f"; and {len(reasons) - 2} more" if len(reasons) > 2 else "")
    log.warning(
        "numeric_gap: the expected error of %d output(s) at %s could not be computed, so the "
        "verdict does not judge them (not evaluated): the emulated re-run failed (%s); each is "
        "named in the log file and in summary.json (expected_fallback)",
        len(fallen),
        precision,
        shown,
    )


def build_rows(
    groups: list[GapGroup],
    topo: dict[torch.fx.Node, int],
    slots: dict[tuple[int, int], Slot],
    comparators: Sequence[Comparator],
    tie_tolerance: float,
    emulation: PrecisionEmulation | None = None,
    floor_units: float = 0.0,
) -> list[GapRow]:
    rows: list[GapRow] = []
    for (gi, oi), slot in sorted(slots.items()):
        group = groups[gi]
        shapes = slot.shape or (None, None)
        row = GapRow(
            group=gi,
            topo_index=topo.get(group.anchor, -1) if group.anchor is not None else -1,
            output_index=oi,
            handles=group.handles,
            identifiers=group.identifiers,
            backend=group.backend,
            is_delegated=group.is_delegated,
            status=slot.status,
            runtime_shape=shapes[0],
            reference_shape=shapes[1],
            runtime_dtype=slot.dtype,
            samples=len(slot.rt),
            unobserved_inputs=tuple(group.unobserved_inputs),
        )
        if row.status == "ok" and slot.rt:
            rule = rule_for(group, oi, comparators, tie_tolerance)
            row.comparison = rule.kind(slot.rt[0])
            if row.comparison == "float" and slot.facts:
                _judge_samples(row, slot, emulation.precision if emulation else None)
            row.accumulated = rule.compare(row.comparison, slot.rt, slot.ref, slot.ranked)
            if row.comparison == "float":
                row.budget[ACCUMULATED_DB] = variation_snr(slot.rt, slot.ref)
            if len(slot.loc) == len(slot.rt):
                row.local = rule.compare(row.comparison, slot.rt, slot.loc, slot.ranked_loc)
                if row.comparison == "float" and emulation is not None:
                    _said_fallback(row, slot, group, emulation.precision)
                    exp = slot.exp if len(slot.exp) == len(slot.rt) else None
                    row.budget.update(
                        error_budget(slot.rt, slot.loc, exp, emulation.precision, floor_units)
                    )
        rows.append(row)
    return rows


def _judge_samples(row: GapRow, slot: Slot, precision: str | None) -> None:
    """The row's per-sample columns, whether its error is systematic (only where every sample's
    expected error is known) and each sample's SNR for the report's plot."""
    row.per_sample = summarize(slot.facts)
    row.systematic = (
        precision is not None and not slot.exp_failed and is_systematic(row.per_sample, precision)
    )
    row.sample_snr = [
        (f.sample, f.accumulated_snr if math.isnan(f.local_snr) else f.local_snr)
        for f in slot.facts
    ]


def group_slots(
    gi: int,
    group: GapGroup,
    walks: list[SampleWalk],
    noted: set[int],
    judging: tuple[PrecisionEmulation | None, float],
) -> dict[tuple[int, int], Slot]:
    """One group's runtime outputs over the samples, paired with their reference values."""
    slots: dict[tuple[int, int], Slot] = {}
    for walk in walks:
        if gi not in walk.values:
            continue
        if gi not in noted:  # once per group: the same ops are logged in every sample
            noted.add(gi)
            note_unobserved(group, walk.substituted)
        env, subst = walk.env, walk.subst
        emulation, floor_units = judging
        collect_group(
            slots,
            gi,
            group,
            walk.values[gi],
            env,
            subst,
            walk.fixed,
            emulation,
            (walk.sample, floor_units),
        )
    return slots
