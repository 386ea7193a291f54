"""Findings of the delegate debug-handle map check, as lowering.json and summary.json hold them.

The lower stage checks each partition's map against its nodes; the analysis checks what the
runtime logged against the map. Both write the same record (docs/delegate_map_check.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stages.closed_sets import MapFindingKind
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier

ERROR, WARNING = "error", "warning"
# Errors: results of the partition would be wrong or missing without the check; warnings: legal
# maps that only make the analysis coarser (see docs/delegate_map_check.md).
SEVERITY: dict[MapFindingKind, str] = {
    MapFindingKind.empty_map: ERROR,
    MapFindingKind.uncovered_handles: ERROR,
    MapFindingKind.unknown_handles: ERROR,
    MapFindingKind.shared_handles: WARNING,
    MapFindingKind.unmapped_identifier: ERROR,
    MapFindingKind.no_intermediate_outputs: WARNING,
    MapFindingKind.clock_mismatch: ERROR,
    MapFindingKind.shape_mismatch: ERROR,
}
# Where the findings live: lowering.json (and the ETRecord's lowering info), summary.json.
MAP_CHECK_KEY = "delegate_map_check"


class MapFindingError(ValueError):
    """A recorded finding that is not one of the closed set's shape."""


@dataclass(frozen=True)
class MapFinding:
    """One map bug: its kind, the partition, the identifiers and handles concerned, and why."""

    kind: MapFindingKind
    partition_id: int
    backend_name: str
    identifiers: tuple[DelegateIdentifier, ...] = ()
    handles: tuple[DebugHandle, ...] = ()
    ops: tuple[str, ...] = ()
    message: str = ""
    stage: str = "lower"  # "lower" (map against nodes) or "analyze" (map against the ETDump)
    # Identifiers whose logged outputs the analysis must not compare (they may stand for other ops).
    not_comparable: tuple[DelegateIdentifier, ...] = field(default=())
    # The figures behind a runtime-evidence finding (clock ratio, logged and expected shapes).
    numbers: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def severity(self) -> str:
        return SEVERITY[self.kind]

    def record(self) -> dict[str, Any]:
        """The JSON record (lowering.json, summary.json)."""
        return {
            "kind": self.kind.value,
            "severity": self.severity,
            "stage": self.stage,
            "partition_id": self.partition_id,
            "backend": self.backend_name,
            "identifiers": list(self.identifiers),
            "debug_handles": list(self.handles),
            "ops": list(self.ops),
            "not_comparable": list(self.not_comparable),
            "message": self.message,
            **({"numbers": dict(self.numbers)} if self.numbers else {}),
        }

    def line(self) -> str:
        """One short phrase for a log line."""
        return f"partition {self.partition_id} ({self.backend_name}) {self.kind.value}"

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> MapFinding:
        """Read a record back (from an ETRecord's lowering info); refuses unknown kinds."""
        try:
            kind = MapFindingKind(str(record["kind"]))
            return cls(
                kind=kind,
                partition_id=int(record["partition_id"]),
                backend_name=str(record.get("backend", "")),
                identifiers=tuple(_identifiers(record.get("identifiers", []))),
                handles=tuple(int(h) for h in record.get("debug_handles", [])),
                ops=tuple(str(o) for o in record.get("ops", [])),
                message=str(record.get("message", "")),
                stage=str(record.get("stage", "lower")),
                not_comparable=tuple(_identifiers(record.get("not_comparable", []))),
                numbers=dict(record.get("numbers", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MapFindingError(
                f"a {MAP_CHECK_KEY} record is malformed ({exc}): {record}"
            ) from exc


def _identifiers(values: Iterable[Any]) -> list[DelegateIdentifier]:
    return [v if isinstance(v, str) else int(v) for v in values]


def summary_line(findings: list[MapFinding]) -> str:
    """'N error(s), M warning(s): partition 0 (npu) empty_map; ...' for one log line."""
    errors = sum(1 for f in findings if f.severity == ERROR)
    warnings = len(findings) - errors
    shown = "; ".join(f.line() for f in findings[:6])
    more = f"; and {len(findings) - 6} more" if len(findings) > 6 else ""
    return f"{errors} error(s), {warnings} warning(s): {shown}{more}"
