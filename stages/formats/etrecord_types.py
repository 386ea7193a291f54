"""What an ETRecord's readers share: its error type and a delegate's debug-handle map record.

Kept apart from `etrecord` so ExecuTorch's ETRecord reader can build the same view without
importing the module that dispatches to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from stages.handles.debug_handles import DebugHandle, DelegateIdentifier

# Where a delegate's identifier map comes from: the backend itself, or recovered by the
# analysis from the delegate's serialized graph (stages.analyze.link.xnnpack.recovery).
OWN_MAP = "map"
RECOVERED_MAP = "recovered"
# runtime.observe=tap: a tapped value is logged under its delegate call with the identifier
# "tap:<handle>,<handle>" (the handles it stands for); its events say link_source "tap".
TAP_IDENTIFIER = "tap:"
TAP_LINK = "tap"


def tap_identifier_handles(identifier: object) -> tuple[int, ...] | None:
    """The handles a tap identifier names, None for any other identifier."""
    if not isinstance(identifier, str) or not identifier.startswith(TAP_IDENTIFIER):
        return None
    parts = identifier.removeprefix(TAP_IDENTIFIER).split(",")
    return tuple(int(p) for p in parts if p.strip().lstrip("-").isdigit())


class ETRecordError(Exception):
    """An ETRecord file is missing, truncated, of another version, or carries unsafe data."""


@dataclass(frozen=True)
class DelegateMapRecord:
    """One delegated partition: its backend and the identifier → handles map it emitted."""

    partition_id: int
    backend_name: str
    debug_handle_map: dict[DelegateIdentifier, tuple[DebugHandle, ...]]
    delegated_handles: tuple[DebugHandle, ...] = ()
    map_source: str = OWN_MAP
