"""DelegateMappingBuilder: a backend's map from delegate debug identifiers to debug handles.

Both API generations ExecuTorch users know: `insert_delegate_mapping_entry(nodes=…|handles=…,
identifier=…)` and the append-style `upsert_delegate_mapping_entry`. What it can know is wrong
(no handles, handles that are not ints ≥ 1, op nodes without a handle, reserved or mixed
identifiers, a duplicate identifier on insert) is refused at the call that does it.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

from stages.handles.debug_handles import DEBUG_HANDLE_META, DebugHandle, DelegateIdentifier

# Identifier values ETDump reads as "no delegate identifier": a map must not use them.
RESERVED_IDENTIFIERS: tuple[DelegateIdentifier, ...] = (-1, "")


class DelegateMappingError(ValueError):
    """The builder was used in a way that would produce an ambiguous or empty map."""


def _handle(value: Any, where: str) -> DebugHandle:
    """An int ≥ 1 (bools, floats, strings and None refused), or a DelegateMappingError."""
    if isinstance(value, bool) or value is None:
        raise DelegateMappingError(
            f"{where}: {value!r} is not a debug handle (an int ≥ 1, node.meta['debug_handle']); "
            "none of None/bool carries a debug handle"
        )
    try:
        handle = operator.index(value)
    except TypeError:
        raise DelegateMappingError(
            f"{where}: {value!r} ({type(value).__name__}) is not a debug handle; pass ints "
            "(node.meta['debug_handle']) or nodes="
        ) from None
    if handle < 1:
        raise DelegateMappingError(f"{where}: handle {handle} < 1; debug handles start at 1")
    return handle


def _node_handles(nodes: Iterable[Any]) -> list[DebugHandle]:
    """Handles of fx nodes; an op node (call_function) without one is refused."""
    handles = []
    for node in nodes:
        meta = getattr(node, "meta", None)
        if meta is None:
            raise DelegateMappingError(
                f"nodes=: {node!r} is not an fx node; pass nodes of the partition, or handles="
            )
        handle = meta.get(DEBUG_HANDLE_META)
        if handle is None:
            if getattr(node, "op", "") == "call_function":
                raise DelegateMappingError(
                    f"node {getattr(node, 'name', node)!r} carries no debug handle; run the "
                    "debug-handle pass on the program before preprocess"
                )
            continue  # placeholders (weights, inputs) and outputs have no handle
        handles.append(_handle(handle, f"node {getattr(node, 'name', node)!r}"))
    return handles


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple | set | frozenset) else [value]


class DelegateMappingBuilder:
    """Collects identifier → debug handles; `generated_identifiers=True` numbers entries itself."""

    def __init__(self, generated_identifiers: bool = False) -> None:
        self._generated = generated_identifiers
        self._next = 0
        self._map: dict[DelegateIdentifier, set[DebugHandle]] = {}

    def _identifier(self, identifier: DelegateIdentifier | None) -> DelegateIdentifier:
        if self._generated:
            if identifier is not None:
                raise DelegateMappingError(
                    f"identifier={identifier!r} given to a builder with generated_identifiers=True; "
                    "omit it, or create the builder with generated_identifiers=False"
                )
            while self._next in self._map:
                self._next += 1
            generated = self._next
            self._next += 1
            return generated
        if identifier is None:
            raise DelegateMappingError(
                "no identifier given to a builder with generated_identifiers=False; pass "
                "identifier=<int|str>, or create the builder with generated_identifiers=True"
            )
        if not isinstance(identifier, int | str) or isinstance(identifier, bool):
            raise DelegateMappingError(f"identifier {identifier!r} must be an int or a str")
        if identifier in RESERVED_IDENTIFIERS:
            raise DelegateMappingError(
                f"identifier {identifier!r} is reserved: ETDump reads -1 and '' as 'no delegate "
                "identifier', so events logged under it could not be told apart"
            )
        return identifier

    def insert_delegate_mapping_entry(
        self,
        nodes: Any | Sequence[Any] | None = None,
        handles: DebugHandle | Sequence[DebugHandle] | None = None,
        identifier: DelegateIdentifier | None = None,
    ) -> DelegateIdentifier:
        """Add a new entry for fx nodes (their handles) or for explicit handles; returns its id."""
        if (nodes is None) == (handles is None):
            raise DelegateMappingError("pass exactly one of nodes= or handles=")
        if nodes is not None:
            found = _node_handles(_as_list(nodes))
        else:
            found = [_handle(h, "handles=") for h in _as_list(handles)]
        if not found:
            raise DelegateMappingError(
                "no debug handle to map: none of the given nodes carries a debug handle (pass the "
                "partition's op nodes, after the debug-handle pass), or handles= is empty"
            )
        key = self._identifier(identifier)
        if key in self._map:
            raise DelegateMappingError(
                f"identifier {key!r} is already mapped to {sorted(self._map[key])}; use "
                "upsert_delegate_mapping_entry to add handles to it"
            )
        self._map[key] = set(found)
        return key

    def upsert_delegate_mapping_entry(
        self, nodes: Any | Sequence[Any], identifier: DelegateIdentifier | None = None
    ) -> DelegateIdentifier:
        """Add nodes' handles to `identifier` (created if new; generated when omitted)."""
        found = _node_handles(_as_list(nodes))
        if not found:
            raise DelegateMappingError("none of the given nodes carries a debug handle")
        if identifier is not None and identifier in self._map:
            self._map[identifier].update(found)
            return identifier
        if self._generated and identifier is not None:
            raise DelegateMappingError(
                f"identifier={identifier!r} is not in this generated-identifier map; omit it to "
                "create a new entry"
            )
        key = self._identifier(identifier)
        self._map[key] = set(found)
        return key

    def get_delegate_mapping(self) -> dict[DelegateIdentifier, tuple[DebugHandle, ...]]:
        """{identifier: sorted tuple of handles}."""
        return {key: tuple(sorted(handles)) for key, handles in self._map.items()}
