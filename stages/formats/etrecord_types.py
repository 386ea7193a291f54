"""What an ETRecord's readers share: its error type and a delegate's debug-handle map record.

Kept apart from `etrecord` so ExecuTorch's ETRecord reader can build the same view without
importing the module that dispatches to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from stages.formats.debug_handles import DebugHandle, DelegateIdentifier


class ETRecordError(Exception):
    """An ETRecord file is missing, truncated, of another version, or carries unsafe data."""


@dataclass(frozen=True)
class DelegateMapRecord:
    """One delegated partition: its backend and the identifier → handles map it emitted."""

    partition_id: int
    backend_name: str
    debug_handle_map: dict[DelegateIdentifier, tuple[DebugHandle, ...]]
    delegated_handles: tuple[DebugHandle, ...] = ()
