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
from stages.backends.delegate_map_findings import MapFinding
from stages.closed_sets import MapFindingKind
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier, get_debug_handle


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


def _empty(backend: str, pid: int, nodes: list[torch.fx.Node], own: set[int]) -> MapFinding:
    return MapFinding(
        MapFindingKind.empty_map,
        pid,
        backend,
        (),
        tuple(sorted(own)),
        _names(nodes, own),
        f"partition {pid} delegates {len(nodes)} op(s) but its map has no entries: no kernel "
        "event or output can be tied to an op; the partition is compared as a whole",
    )


def _unknown(
    backend: str, pid: int, own: set[int], mapping: dict[DelegateIdentifier, tuple[int, ...]]
) -> list[MapFinding]:
    """Identifiers mapping handles outside the partition: those name no op its kernel computes,
    so the output is compared on the partition's own handles, or not at all when none is left."""
    findings = []
    for identifier, handles in mapping.items():
        unknown = [h for h in handles if not _valid_handle(h) or h not in own]
        valid = [h for h in handles if _valid_handle(h) and h in own]
        if not unknown and handles:
            continue
        compared = (
            f"its outputs are compared as those of handles {valid}"
            if valid
            else ("its outputs are not compared")
        )
        findings.append(
            MapFinding(
                MapFindingKind.unknown_handles,
                pid,
                backend,
                (identifier,),
                tuple(unknown),
                (),
                f"identifier {identifier!r} maps to {unknown or 'no handles'}, which are not ops "
                f"of partition {pid} (its handles: {sorted(own)}); {compared}",
                not_comparable=() if valid else (identifier,),
            )
        )
    return findings


def _uncovered(
    backend: str,
    partition: PartitionGraph,
    own: set[int],
    claims: dict[DebugHandle, list[DelegateIdentifier]],
) -> list[MapFinding]:
    uncovered = sorted(own - set(claims))
    if not uncovered:
        return []
    nodes = _op_nodes(partition)
    missing = {n for n in nodes if get_debug_handle(n) in set(uncovered)}
    owner = {
        n: claims[h]
        for n in partition.nodes
        if (h := get_debug_handle(n)) is not None and h in claims
    }
    rank = {i: k for k, i in enumerate(dict.fromkeys(i for ids in claims.values() for i in ids))}
    feeding = sorted(_feeders(missing, owner), key=lambda i: rank.get(i, len(rank)))
    names = _names(nodes, set(uncovered))
    pid = partition.partition_id
    why = (
        f"the outputs of {feeding} may be theirs (a fused kernel that maps only its first op), "
        "so they are not compared"
        if feeding
        else "their outputs cannot be observed"
    )
    return [
        MapFinding(
            MapFindingKind.uncovered_handles,
            pid,
            backend,
            tuple(feeding),
            tuple(uncovered),
            names,
            f"no identifier of partition {pid} covers handles {uncovered} ({', '.join(names)}); "
            + why,
            not_comparable=tuple(feeding),
        )
    ]


def _shared(
    backend: str,
    pid: int,
    nodes: list[torch.fx.Node],
    claims: dict[DebugHandle, list[DelegateIdentifier]],
) -> list[MapFinding]:
    shared = {h: ids for h, ids in claims.items() if len(ids) > 1}
    if not shared:
        return []
    ids = list(dict.fromkeys(i for group in shared.values() for i in group))
    handles = sorted(shared)
    return [
        MapFinding(
            MapFindingKind.shared_handles,
            pid,
            backend,
            tuple(ids),
            tuple(handles),
            _names(nodes, set(handles)),
            f"handles {handles} are claimed by more than one identifier ({ids}); the analysis "
            "compares those identifiers as one group, at its last op's output",
        )
    ]


def check_partition_map(
    backend: str, partition: PartitionGraph, raw_map: Mapping[Any, Any]
) -> list[MapFinding]:
    """Findings of one partition's map: empty, uncovered, unknown and shared handles."""
    nodes = _op_nodes(partition)
    if not nodes:
        return []
    mapping = _checked_map(backend, partition, raw_map)
    pid = partition.partition_id
    own = {h for n in partition.nodes if (h := get_debug_handle(n)) is not None}
    if not mapping:
        return [_empty(backend, pid, nodes, own)]
    claims: dict[DebugHandle, list[DelegateIdentifier]] = {}
    for identifier, handles in mapping.items():
        for h in handles:
            if _valid_handle(h) and h in own:
                claims.setdefault(h, []).append(identifier)
    return [
        *_unknown(backend, pid, own, mapping),
        *_uncovered(backend, partition, own, claims),
        *_shared(backend, pid, nodes, claims),
    ]


def check_maps(
    backend: str, partitions: list[PartitionGraph], maps: Mapping[int, Mapping[Any, Any]]
) -> list[MapFinding]:
    """Every partition's findings, in partition order."""
    return [f for g in partitions for f in check_partition_map(backend, g, maps[g.partition_id])]
