"""Check what the runtime logged against the delegate debug-handle maps of the ETRecord.

Adds the run-time findings (`unmapped_identifier`, `no_intermediate_outputs`) to the ones the
lower stage recorded, and decides what the numeric gap may compare: outputs of identifiers a
finding makes ambiguous are left out, and a partition none of whose own outputs can be used is
compared as a whole, from its delegate call's logged outputs (docs/delegate_map_check.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from stages.analyze.link.linking import Link, ProgramIndex, identifier_of, link_event
from stages.analyze.link.partition_ops import BLAME_KEYS, partition_ops
from stages.analyze.link.runtime_evidence import runtime_evidence
from stages.analyze.load.unused_inputs import NUMERIC_GAP, NotEvaluated
from stages.backends.delegate_map_findings import (
    ERROR,
    MAP_CHECK_KEY,
    MapFinding,
    summary_line,
)
from stages.closed_sets import MapFindingKind
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import DELEGATE_CALL_EVENT, STAMP_EVENTS, DebugEvent
from stages.formats.etdump.streaming import holds_debug_events
from stages.formats.etrecord import DelegateMapRecord, ETRecord
from stages.formats.etrecord_types import tap_identifier_handles
from stages.handles.debug_handles import DelegateIdentifier

log = logging.getLogger(__name__)

MAP_OPTION = "backend._target_"  # whose preprocess (map) and runtime (logging) the findings name
OBSERVE_OPTION = "runtime.observe"  # what sees inside a partition its runtime logs whole
# What a partition compared whole hides, and what narrows it (stages.lower.executorch.tap,
# stages.analyze.compare.bisection).
WHOLE_PARTITION_NOTE = (
    "it is compared as a whole, from its delegate call's outputs, so an error inside it that "
    "reaches those outputs below the precision's own error is not seen; runtime.observe=tap "
    "brings each op's value back on ExecuTorch backends (executorch_*), and "
    "runtime.observe=bisect narrows a divergence to its op on any backend"
)


@dataclass(frozen=True)
class MapCheck:
    """All findings, and what they mean for the numeric gap."""

    findings: tuple[MapFinding, ...] = ()
    # (partition, identifier) whose logged outputs are not compared.
    not_comparable: frozenset[tuple[int, DelegateIdentifier]] = frozenset()
    # Partitions compared as a whole, from their delegate call's outputs.
    whole_partitions: frozenset[int] = frozenset()
    # (partition, identifier) that map handles outside their partition: compared on the rest.
    trimmed: frozenset[tuple[int, DelegateIdentifier]] = frozenset()

    def explains_divergence(self) -> bool:
        """Whether an error finding may explain outputs that differ (so the inputs are not
        suspected first)."""
        return any(f.severity == ERROR for f in self.findings)

    def records(self) -> list[dict[str, Any]]:
        return [f.record() for f in self.findings]

    def output_link(self, index: ProgramIndex, de: DebugEvent) -> Link | None:
        """The link a logged output is compared under, or None when it must not be compared."""
        ident = identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)
        record = index.delegate_instructions.get(de.instruction_id)
        if ident is None and record is not None:
            if record.partition_id not in self.whole_partitions:
                return None
            return Link(
                record.delegated_handles, True, record.backend_name, None, record.partition_id
            )
        link = link_event(index, de.name, de.instruction_id, ident)
        if link is None or not link.debug_handles:
            return None
        if ident is not None and (link.partition_id, ident) in self.not_comparable:
            return None
        if record is not None and (record.partition_id, ident) in self.trimmed:
            # A kernel computes ops of its own partition only: the other handles name nothing.
            own = tuple(h for h in link.debug_handles if h in record.delegated_handles)
            return replace(link, debug_handles=own) if own else None
        return link


def recorded_findings(record: ETRecord | None) -> list[MapFinding]:
    """The lower stage's findings, as the ETRecord's lowering info holds them."""
    if record is None:
        return []
    return [MapFinding.from_record(r) for r in record.lowering_info.get(MAP_CHECK_KEY, [])]


def _identifier_events(dump: ETDumpData) -> Iterator[tuple[int, DelegateIdentifier, bool]]:
    """(instruction id, identifier, is a logged output) of every delegate event."""
    for block in dump.run_data:
        for event in block.events:
            pe, de = event.profile_event, event.debug_event
            if pe is not None and pe.name not in STAMP_EVENTS:
                ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
                if ident is not None:
                    yield pe.instruction_id, ident, False
            elif de is not None and de.instruction_id >= 0:
                ident = identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)
                if ident is not None:
                    yield de.instruction_id, ident, True


def _executed_in_capture(dump: ETDumpData, index: ProgramIndex) -> set[int]:
    """Delegate instructions that ran in a block where the run logged intermediate outputs."""
    found: set[int] = set()
    for block in filter(holds_debug_events, dump.run_data):
        debug = [e.debug_event for e in block.events if e.debug_event is not None]
        if not any(de.instruction_id >= 0 for de in debug):
            continue  # not a capture block: the run did not ask for outputs here
        for event in block.events:
            pe, de = event.profile_event, event.debug_event
            iid = pe.instruction_id if pe is not None and pe.name == DELEGATE_CALL_EVENT else None
            iid = de.instruction_id if de is not None else iid
            if iid is not None and iid in index.delegate_instructions:
                found.add(iid)
    return found


def _op_names(index: ProgramIndex, handles: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(name for h in handles if h in index.handles for name in index.handles[h].op_names)


def _unmapped(
    index: ProgramIndex, seen: dict[tuple[int, DelegateIdentifier], bool], uncovered: dict[int, Any]
) -> list[MapFinding]:
    by_partition: dict[int, list[DelegateIdentifier]] = {}
    maps: dict[int, DelegateMapRecord] = {}
    for iid, ident in seen:
        m = index.delegate_instructions.get(iid)
        if m is None or not m.debug_handle_map or ident in m.debug_handle_map:
            continue
        if tap_identifier_handles(ident) is not None:
            continue  # a tapped value (runtime.observe=tap) names its handles itself
        maps[m.partition_id] = m
        if ident not in by_partition.setdefault(m.partition_id, []):
            by_partition[m.partition_id].append(ident)
    findings = []
    for pid, idents in sorted(by_partition.items()):
        candidates = tuple(uncovered.get(pid, ()))
        findings.append(
            MapFinding(
                MapFindingKind.unmapped_identifier,
                pid,
                maps[pid].backend_name,
                tuple(idents),
                candidates,
                _op_names(index, candidates),
                f"the runtime logged identifier(s) {idents} under partition {pid}'s delegate "
                "call, but its map has no such entry: their events are kept (timings, under "
                "the delegate call) and their outputs are not compared"
                + (
                    f"; the ops no identifier covers: handles {list(candidates)}"
                    if candidates
                    else ""
                ),
                stage="analyze",
                not_comparable=tuple(idents),
            )
        )
    return findings


def _silent(
    index: ProgramIndex, executed: set[int], seen: dict[tuple[int, DelegateIdentifier], bool]
) -> list[MapFinding]:
    """Partitions that ran in a capture block but logged no output of their own."""
    logged = {iid for (iid, _), output in seen.items() if output}
    silent = {
        index.delegate_instructions[iid].partition_id: index.delegate_instructions[iid]
        for iid in sorted(executed - logged)
    }
    return [
        MapFinding(
            MapFindingKind.no_intermediate_outputs,
            pid,
            m.backend_name,
            tuple(m.debug_handle_map),
            m.delegated_handles,
            _op_names(index, m.delegated_handles),
            f"partition {pid} ({m.backend_name}) logged no intermediate outputs although the run "
            f"logged them (runtime.debug_level=intermediate_outputs): {WHOLE_PARTITION_NOTE}",
            stage="analyze",
        )
        for pid, m in sorted(silent.items())
    ]


def _whole(
    index: ProgramIndex,
    seen: dict[tuple[int, DelegateIdentifier], bool],
    not_comparable: set[tuple[int, DelegateIdentifier]],
    ran: set[int],
) -> set[int]:
    """Partitions that ran while outputs were logged, none of whose own outputs can be compared."""
    delegated = {m.partition_id for m in index.maps if m.delegated_handles}
    usable: set[int] = set()
    for (iid, ident), output in seen.items():
        m = index.delegate_instructions.get(iid)
        tapped = tap_identifier_handles(ident) is not None
        if m is None or not output or (ident not in m.debug_handle_map and not tapped):
            continue
        if (m.partition_id, ident) not in not_comparable:
            usable.add(m.partition_id)
    return {p for p in ran if p in delegated} - usable


def check_runtime_maps(dump: ETDumpData, index: ProgramIndex, record: ETRecord | None) -> MapCheck:
    """The lower stage's findings plus what the ETDump shows (identifiers, logged outputs' shapes,
    the kernels' clock), and their effect on comparison."""
    lowered = recorded_findings(record)
    seen: dict[tuple[int, DelegateIdentifier], bool] = {}
    for iid, ident, output in _identifier_events(dump):
        seen[(iid, ident)] = seen.get((iid, ident), False) or output
    uncovered = {
        f.partition_id: f.handles for f in lowered if f.kind == MapFindingKind.uncovered_handles
    }
    executed = _executed_in_capture(dump, index)
    runtime = _unmapped(index, seen, uncovered) + _silent(index, executed, seen)
    runtime += runtime_evidence(dump, index, record)
    ran = {index.delegate_instructions[iid].partition_id for iid in executed}
    findings = tuple(lowered + runtime)
    not_comparable = {(f.partition_id, i) for f in findings for i in f.not_comparable}
    whole = _whole(index, seen, not_comparable, ran)
    trimmed = {
        (f.partition_id, i)
        for f in findings
        if f.kind == MapFindingKind.unknown_handles
        for i in f.identifiers
    }
    return MapCheck(findings, frozenset(not_comparable), frozenset(whole), frozenset(trimmed))


def map_not_evaluated(check: MapCheck) -> list[NotEvaluated]:
    """What the map findings kept out of the numeric gap, for summary.json's not_evaluated."""
    items = []
    for f in check.findings:
        if f.not_comparable:
            items.append(
                NotEvaluated(
                    f"{NUMERIC_GAP} of partition {f.partition_id} ({f.backend_name}) identifiers "
                    f"{list(f.not_comparable)}",
                    MAP_OPTION,
                    f"{f.kind.value}: {f.message}",
                    False,
                )
            )
    for pid in sorted(check.whole_partitions):
        items.append(
            NotEvaluated(
                f"{NUMERIC_GAP} per op inside partition {pid}",
                OBSERVE_OPTION,
                f"none of its own logged outputs can be tied to its ops: {WHOLE_PARTITION_NOTE}",
                False,
            )
        )
    return items


def log_findings(check: MapCheck) -> None:
    """One log line for all findings (error level when any is an error)."""
    if not check.findings:
        return
    level = logging.ERROR if any(f.severity == ERROR for f in check.findings) else logging.WARNING
    log.log(
        level,
        "[analyze] delegate map check: %s; details in summary.json's %s",
        summary_line(list(check.findings)),
        MAP_CHECK_KEY,
    )


def whole_partition_divergence(
    check: MapCheck,
    index: ProgramIndex,
    first: dict[str, Any] | None,
    bisected: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A first divergence that is a partition compared as a whole, named as that partition
    (its ops in order, its identifiers) and blamed on the op bisection found in it
    (runtime.observe=bisect: `bisected` is its record), else on its first op's line (which op
    inside it diverged cannot be told), said to be not narrowable; other divergences unchanged."""
    if first is None:
        return None
    handles = tuple(first.get("debug_handles", ()))
    for m in index.maps:
        # As sets: ExecuTorch's delegated handles keep its repeats (1, 2, 2, 3, ...).
        if m.partition_id in check.whole_partitions and set(m.delegated_handles) == set(handles):
            ops = partition_ops(index, sorted(set(m.delegated_handles)))
            found = (bisected or {}).get("op")
            blamed = next((o for o in ops if o["op"] == found), None) if found else None
            head = blamed or (ops[0] if ops else {})
            return {
                **first,
                "partition_id": m.partition_id,
                "delegate_backend_name": m.backend_name,
                "delegate_debug_identifiers": list(m.debug_handle_map),
                **{key: head.get(key, "") for key in BLAME_KEYS},
                "ops_in_order": ops,
                "narrowed": blamed is not None,
                **(_bisected_keys(blamed, bisected) if blamed and bisected else {}),
                "note": _whole_note(m.partition_id, m.backend_name, blamed, bisected),
            }
    return first


def _bisected_keys(blamed: dict[str, Any], bisected: dict[str, Any]) -> dict[str, Any]:
    """The op bisection named inside a partition, and how."""
    return {
        "op": blamed["op"],
        "op_debug_handle": blamed["debug_handle"],
        "found_by": bisected.get("found_by", "bisection"),
        "lowerings": bisected.get("lowerings", 0),
    }


def _whole_note(
    pid: int, backend: str, blamed: dict[str, Any] | None, bisected: dict[str, Any] | None
) -> str:
    said = (
        f"partition {pid} ({backend}) diverges; it is compared as a whole (its own outputs "
        "could not be used: see delegate_map_check)"
    )
    if blamed is not None and bisected is not None:
        return (
            f"{said}; runtime.observe=bisect lowered prefixes of it: {blamed['op']} is its first "
            f"op that diverges (found by bisection, {bisected.get('lowerings', 0)} lowerings), "
            "the line shown is that op's"
        )
    why = f" ({bisected['note']})" if bisected and bisected.get("note") else ""
    hint = "" if bisected else "; runtime.observe=bisect narrows it to the op by lowering prefixes"
    return (
        f"{said}, so the divergence could not be narrowed further than its ops{why}; the line "
        f"shown is its first op's (ops_in_order lists each op's){hint}"
    )


def unobserved_inputs_note(first: dict[str, Any] | None, unobserved: tuple[str, ...]) -> None:
    """Say on a first divergence that its inputs were partly not observed, naming those ops: a
    map that hides ops' outputs must not let the next observed op take their blame alone."""
    if first is None or not unobserved:
        return
    first["unobserved_inputs"] = list(unobserved)
    first["narrowed"] = False
    first.setdefault(
        "note",
        f"the runtime values of {', '.join(unobserved)} (inputs of this group) were not observed "
        "(see delegate_map_check and not_evaluated), so its local gap re-ran on their reference "
        "values: the divergence may have started in those ops or in this group",
    )
