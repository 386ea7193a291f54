"""Map errors decide the gate: a run whose delegate map check has errors cannot end as PASS.

Its numeric verdict is kept (`numeric_verdict`), the verdict becomes `map_errors` and names the
ops the map left unverified (`unverified_ops`); `analyze.map_errors=warn` leaves the verdict
alone (docs/delegate_map_check.md, "Findings, verdict and exit codes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stages.analyze.compare.verdict import FAIL, PASS
from stages.analyze.link.linking import ProgramIndex
from stages.backends.delegate_map_findings import ERROR

MAP_ERRORS = "map_errors"  # the verdict of a run whose numbers passed but whose map has errors
UNVERIFIED_KEY = "unverified_ops"


def _identifier_ops(index: ProgramIndex, pid: int, identifiers: Iterable[Any]) -> list[str]:
    """The op names the partition's map gives those identifiers."""
    maps = [m for m in index.maps if m.partition_id == pid]
    handles = [h for m in maps for i in identifiers for h in m.debug_handle_map.get(i, ())]
    return [n for h in handles if h in index.handles for n in index.handles[h].op_names]


def unverified(findings: Sequence[Mapping[str, Any]], index: ProgramIndex) -> list[dict[str, Any]]:
    """Per error finding: the ops it left unverified (its own ops, and those of identifiers
    whose outputs were not compared) or, for a clock, the partition's kernel timings."""
    items = []
    for f in findings:
        if f.get("severity") != ERROR:
            continue
        pid = int(f["partition_id"])
        ops = list(f.get("ops", [])) + _identifier_ops(index, pid, f.get("not_comparable", []))
        items.append(
            {
                "kind": f["kind"],
                "partition_id": pid,
                "ops": list(dict.fromkeys(ops)),
                "what": "kernel timings" if f["kind"] == "clock_mismatch" else "numeric gap",
            }
        )
    return items


def _phrase(item: Mapping[str, Any]) -> str:
    where = f"partition {item['partition_id']} {item['kind']}"
    if item["what"] == "kernel timings":
        return f"{where}: its kernel timings"
    if not item["ops"]:
        return f"{where}: no op left out, the map itself is wrong"
    return f"{where}: {', '.join(item['ops'])}"


def gate_on_map_errors(summary: dict[str, Any], index: ProgramIndex, mode: str) -> None:
    """With errors in `summary`'s map check: list what they left unverified, and (mode `gate`)
    turn a PASS into `map_errors`; a FAIL stays a FAIL and says the map may explain it."""
    items = unverified(summary.get("delegate_map_check", []), index)
    if not items:
        return
    summary[UNVERIFIED_KEY] = items
    status = summary.get("verdict")
    listed = "; ".join(_phrase(i) for i in items)
    summary["numeric_verdict"] = status
    if mode != "gate":
        return
    if status == PASS:
        summary["verdict"] = MAP_ERRORS
        summary["verdict_reason"] = (
            f"the delegate map check found {len(items)} error(s), so not everything was verified "
            f"({listed}); the numeric verdict on the rest is PASS "
            f"({summary.get('verdict_reason', '')}); analyze.map_errors=warn lets it pass"
        )
    elif status == FAIL:
        summary["verdict_reason"] = (
            f"{summary.get('verdict_reason', '')}; the delegate map check found {len(items)} "
            f"error(s) that may explain it ({listed})"
        )
