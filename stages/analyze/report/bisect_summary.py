"""runtime.observe=bisect in summary.json: the bisection's record (`bisection`), and, when the
whole program was bisected because the run logged nothing to compare, the op it found as the
first divergence (the verdict then FAILs on it)."""

from __future__ import annotations

from typing import Any

from stages.analyze.compare.bisect_entry import BISECTION_KEY, Segment
from stages.analyze.compare.bisection import Bisection
from stages.analyze.link.linking import ProgramIndex
from stages.analyze.link.partition_ops import BLAME_KEYS, partition_ops


def bisection_record(segment: Segment, bisection: Bisection) -> dict[str, Any]:
    """What was bisected, what was found and at what cost, each cut's result."""
    return {"scope": segment.scope, **bisection.record()}


def _op_entry(index: ProgramIndex, op: str) -> dict[str, Any] | None:
    """The op's handle, lines and module, as partition_ops lists them."""
    for handle in sorted(index.handles):
        if op in index.handles[handle].op_names:
            return next((o for o in partition_ops(index, [handle]) if o["op"] == op), None)
    return None


def group_divergence(
    summary: dict[str, Any], segment: Segment, bisection: Bisection, index: ProgramIndex
) -> None:
    """A first-divergence group spanning several whole partitions, bisected to an op: blamed
    on that op's line and module."""
    first = summary.get("first_divergence")
    if first is None or bisection.op is None:
        return
    entry = _op_entry(index, bisection.op) or {}
    first.update({key: entry.get(key, "") for key in BLAME_KEYS})
    first.update(
        op=bisection.op,
        narrowed=True,
        found_by=bisection.record()["found_by"],
        lowerings=bisection.lowerings,
        note=f"{segment.scope} compared as a whole; {bisection.note}",
    )


def program_divergence(
    summary: dict[str, Any], segment: Segment, bisection: Bisection, index: ProgramIndex
) -> None:
    """A whole program bisected to an op: that op is the first divergence and the verdict FAILs
    (no intermediate output was logged, so nothing else could be compared)."""
    if segment.partition_id is not None or bisection.op is None:
        return
    if segment.scope != "program":
        group_divergence(summary, segment, bisection, index)
        return
    entry = _op_entry(index, bisection.op) or {"op": bisection.op, "debug_handle": None}
    handle = entry.get("debug_handle")
    cut = next((c for c in bisection.cuts if c["after_op"] == bisection.op), {})
    summary["verdict"] = "fail"
    summary["verdict_reason"] = (
        "the run logged no intermediate outputs; runtime.observe=bisect lowered prefixes of the "
        f"program and {bisection.op} is the first op whose prefix exceeds its expected error "
        f"(found by bisection, {bisection.lowerings} lowerings)"
    )
    summary["first_divergence"] = {
        "op_names": [bisection.op],
        "op": bisection.op,
        "debug_handles": [handle] if handle is not None else [],
        "status": "ok",
        **{key: entry.get(key, "") for key in BLAME_KEYS},
        "narrowed": True,
        # The prefix ending at the op: its worst output's excess over expected error.
        "bisect_excess_db": cut.get("worst_excess_db"),
        "found_by": bisection.record()["found_by"],
        "lowerings": bisection.lowerings,
        "note": bisection.note,
    }


def add_bisection(
    summary: dict[str, Any], found: tuple[Segment, Bisection] | None, index: ProgramIndex
) -> None:
    """summary.json's `bisection` (null when none ran) and a bisected program's divergence."""
    if found is None:
        summary[BISECTION_KEY] = None
        return
    segment, bisection = found
    summary[BISECTION_KEY] = bisection_record(segment, bisection)
    program_divergence(summary, segment, bisection, index)
