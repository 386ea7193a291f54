"""Check each partition's debug-handle map against the partition's nodes, at lower time.

The map (`PreprocessResult.debug_handle_map`) is the contract between a delegate and every
profiling and numeric result; its bugs are findings (docs/delegate_map_check.md), not trusted.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import torch

from stages.backends.backend_api import PartitionGraph
from stages.formats.closed_sets import MapFindingKind
from stages.formats.debug_handles import DebugHandle, DelegateIdentifier, get_debug_handle
from stages.formats.delegate_map_findings import MapFinding


class MapShapeError(ValueError):
    """A map that is not `{int | str: tuple[int, ...]}` at all: the backend must fix its preprocess."""


def _op_nodes(partition: PartitionGraph) -> list[torch.fx.Node]:
    return [n for n in partition.nodes if n.target is not operator.getitem]


def _names(nodes: list[torch.fx.Node], handles: set[DebugHandle]) -> tuple[str, ...]:
    return tuple(n.name for n in nodes if get_debug_handle(n) in handles)


def _valid_handle(value: int) -> bool:
    return value >= 1


def _checked_map(
    backend: str, partition: PartitionGraph, raw: Mapping[Any, Any]
) -> dict[DelegateIdentifier, tuple[int, ...]]:
    """The map with its shape checked: identifiers int (not -1) or non-empty str, handle tuples."""
    where = f"backend '{backend}', partition {partition.partition_id}: PreprocessResult.debug_handle_map"
    if not isinstance(raw, Mapping):
        raise MapShapeError(
            f"{where} is a {type(raw).__name__}, not a dict; build it with "
            "DelegateMappingBuilder.get_delegate_mapping()"
        )
    checked: dict[DelegateIdentifier, tuple[int, ...]] = {}
    for identifier, handles in raw.items():
        if isinstance(identifier, bool) or not isinstance(identifier, int | str):
            raise MapShapeError(f"{where} has identifier {identifier!r}: use an int or a str")
        if identifier in (-1, ""):
            raise MapShapeError(
                f"{where} has identifier {identifier!r}, which ETDump reads as 'no identifier'"
            )
        if isinstance(handles, int | str) or not hasattr(handles, "__iter__"):
            raise MapShapeError(
                f"{where}[{identifier!r}] is {handles!r}: map each identifier to a tuple of handles"
            )
        values = tuple(handles)
        bad = [h for h in values if isinstance(h, bool) or not isinstance(h, int)]
        if bad:
            raise MapShapeError(
                f"{where}[{identifier!r}] holds {bad!r}: debug handles are ints (node.meta"
                "['debug_handle'])"
            )
        checked[identifier] = values
    return checked


def _feeders(
    uncovered: set[torch.fx.Node], owner: dict[torch.fx.Node, list[DelegateIdentifier]]
) -> list[DelegateIdentifier]:
    """Identifiers whose ops feed uncovered ops (through other uncovered ops): their kernels may
    have computed them, so their logged output may be an uncovered op's output."""
    found: list[DelegateIdentifier] = []
    seen: set[torch.fx.Node] = set()
    stack = list(uncovered)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for arg in node.all_input_nodes:
            if arg in uncovered:
                stack.append(arg)
            for identifier in owner.get(arg, []):
                if identifier not in found:
                    found.append(identifier)
    return found


def check_partition_map(
    backend: str, partition: PartitionGraph, raw_map: Mapping[Any, Any]
) -> list[MapFinding]:
    """Findings of one partition's map: empty, uncovered, unknown and shared handles."""
    nodes = _op_nodes(partition)
    if not nodes:
        return []
    mapping = _checked_map(backend, partition, raw_map)
    pid = partition.partition_id
    handles_of = {get_debug_handle(n) for n in partition.nodes} - {None}
    own: set[DebugHandle] = {h for h in handles_of if h is not None}
    all_handles = sorted(own)
    if not mapping:
        return [
            MapFinding(
                MapFindingKind.empty_map,
                pid,
                backend,
                (),
                tuple(all_handles),
                _names(nodes, own),
                f"partition {pid} delegates {len(nodes)} op(s) but its map has no entries: no "
                "kernel event or output can be tied to an op; the partition is compared as a whole",
            )
        ]
    findings: list[MapFinding] = []
    claims: dict[DebugHandle, list[DelegateIdentifier]] = {}
    for identifier, handles in mapping.items():
        unknown = [h for h in handles if not _valid_handle(h) or h not in own]
        for h in handles:
            if _valid_handle(h) and h in own:
                claims.setdefault(h, []).append(identifier)
        valid = [h for h in handles if _valid_handle(h) and h in own]
        if unknown or not handles:
            # Handles outside the partition name no op its kernel computes: the output is
            # compared on the partition's own handles, or not at all when none is left.
            findings.append(
                MapFinding(
                    MapFindingKind.unknown_handles,
                    pid,
                    backend,
                    (identifier,),
                    tuple(h for h in unknown if _valid_handle(h)),
                    (),
                    f"identifier {identifier!r} maps to {list(unknown) or 'no handles'}, which are "
                    f"not ops of partition {pid} (its handles: {all_handles}); "
                    + (
                        f"its outputs are compared as those of handles {valid}"
                        if valid
                        else "its outputs are not compared"
                    ),
                    not_comparable=() if valid else (identifier,),
                )
            )
    uncovered = sorted(own - set(claims))
    if uncovered:
        missing = {n for n in nodes if get_debug_handle(n) in set(uncovered)}
        owner: dict[torch.fx.Node, list[DelegateIdentifier]] = {}
        for node in partition.nodes:
            h = get_debug_handle(node)
            if h in claims:
                owner[node] = claims[h]
        feeding = _feeders(missing, owner)
        findings.append(
            MapFinding(
                MapFindingKind.uncovered_handles,
                pid,
                backend,
                tuple(feeding),
                tuple(uncovered),
                _names(nodes, set(uncovered)),
                f"no identifier of partition {pid} covers handles {uncovered} "
                f"({', '.join(_names(nodes, set(uncovered)))}); "
                + (
                    f"the outputs of {feeding} may be theirs (a fused kernel that maps only "
                    "its first op), so they are not compared"
                    if feeding
                    else "their outputs cannot be observed"
                ),
                not_comparable=tuple(feeding),
            )
        )
    shared = {h: ids for h, ids in claims.items() if len(ids) > 1}
    if shared:
        ids = list(dict.fromkeys(i for group in shared.values() for i in group))
        handles = sorted(shared)
        findings.append(
            MapFinding(
                MapFindingKind.shared_handles,
                pid,
                backend,
                tuple(ids),
                tuple(handles),
                _names(nodes, set(handles)),
                f"handles {handles} are claimed by more than one identifier ({ids}); the "
                "analysis compares those identifiers as one group, at its last op's output",
            )
        )
    return findings


def check_maps(
    backend: str, partitions: list[PartitionGraph], maps: Mapping[int, Mapping[Any, Any]]
) -> list[MapFinding]:
    """Every partition's findings, in partition order."""
    return [f for g in partitions for f in check_partition_map(backend, g, maps[g.partition_id])]
