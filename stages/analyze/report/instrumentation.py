"""summary.json `instrumentation` (runtime.observe=tap): what the instrumented program changed,
the tapped values refused, and how many of the ops the delegates run got a numeric row of their
own, with the one line the terminal and report.html show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stages.analyze.link.linking import ProgramIndex
from stages.formats.etrecord_types import tap_identifier_handles

INSTRUMENTATION_KEY = "instrumentation"
_MAX_BYTES = 32 << 20


def _compared(row: dict[str, Any]) -> bool:
    """The row compared at least one sample (a group whose last op holds no tensor, an
    `_assert_tensor_metadata`, compares none)."""
    try:
        return int(row.get("samples") or 0) > 0
    except (TypeError, ValueError):
        return False


def _tapped_ops(gaps: list[dict[str, Any]]) -> tuple[set[int], dict[int, str]]:
    """Handles a tapped row compared, and those only rows of no sample cover (with why)."""
    found: set[int] = set()
    empty: dict[int, str] = {}
    for row in gaps:
        identifiers = row.get("delegate_debug_identifiers") or []
        if not any(tap_identifier_handles(i) is not None for i in identifiers):
            continue
        handles = {int(h) for h in row.get("debug_handles") or []}
        if _compared(row):
            found |= handles
            continue
        reason = f"its group (row {row.get('group')}) compared 0 samples"
        empty.update(dict.fromkeys(handles, reason))
    return found, {h: why for h, why in empty.items() if h not in found}


def instrumentation_record(
    path: Path, index: ProgramIndex, gaps: list[dict[str, Any]]
) -> dict[str, Any]:
    """The run stage's instrumentation.json plus rows per op a delegate runs (taps.json's
    `delegated_ops`: ops XNNPACK computes, by the XNNPACK nodes carrying their handles)."""
    if path.stat().st_size > _MAX_BYTES:
        return {"error": f"{path.name} is over {_MAX_BYTES} bytes: not read"}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {"error": f"{path.name} is not the run stage's JSON ({exc}): not read"}
    if not isinstance(record, dict):
        return {"error": f"{path.name} holds no JSON object: not read"}
    delegated = {str(k): int(v) for k, v in dict(record.pop("delegated_ops", {})).items()}
    rows, empty = _tapped_ops(gaps)
    attributed = {name: index.handle_attribution.get(h, h) for name, h in delegated.items()}
    without = sorted(name for name, h in attributed.items() if h not in rows)
    record["ops_delegated"] = len(delegated)
    record["ops_with_rows"] = len(delegated) - len(without)
    record["rows_per_op"] = record["ops_with_rows"] / len(delegated) if delegated else None
    record["ops_without_rows"] = without
    # Ops whose tapped row compared nothing: not covered, and why.
    record["not_evaluated"] = {
        name: empty[attributed[name]] for name in without if attributed[name] in empty
    }
    return record


def add_instrumentation(
    summary: dict[str, Any], path: Path | None, index: ProgramIndex, gaps: list[dict[str, Any]]
) -> None:
    """summary.json `instrumentation` when the run was tapped (runtime.observe=tap)."""
    if path is not None:
        summary[INSTRUMENTATION_KEY] = instrumentation_record(path, index, gaps)
