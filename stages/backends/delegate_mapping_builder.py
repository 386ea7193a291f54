"""DelegateMappingBuilder: a backend's map from delegate debug identifiers to debug handles.

Both API generations ExecuTorch users know: `insert_delegate_mapping_entry(nodes=…|handles=…,
identifier=…)` and the append-style `upsert_delegate_mapping_entry`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from stages.formats.debug_handles import DEBUG_HANDLE_META, DebugHandle, DelegateIdentifier


class DelegateMappingError(ValueError):
    """The builder was used in a way that would produce an ambiguous or empty map."""


def _node_handles(nodes: Iterable[Any]) -> list[DebugHandle]:
    handles = []
    for node in nodes:
        handle = node.meta.get(DEBUG_HANDLE_META) if hasattr(node, "meta") else None
        if handle is not None:
            handles.append(int(handle))
    return handles


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
            found = _node_handles(nodes if isinstance(nodes, list | tuple) else [nodes])
        else:
            raw: Sequence[Any] = handles if isinstance(handles, list | tuple) else [handles]
            found = [int(h) for h in raw if h is not None]
        if not found:
            raise DelegateMappingError(
                "none of the given nodes/handles carries a debug handle; run the debug-handle pass "
                "on the program before preprocess"
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
        found = _node_handles(nodes if isinstance(nodes, list | tuple) else [nodes])
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
