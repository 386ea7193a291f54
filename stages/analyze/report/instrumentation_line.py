"""The one line the terminal and report.html show for summary.json `instrumentation`
(runtime.observe=tap)."""

from __future__ import annotations

from typing import Any


def instrumentation_line(record: dict[str, Any] | None) -> str:
    """One line: rows per delegated op, whether instrumentation changed what ran, refusals."""
    if not record:
        return ""
    changed = record.get("fusion_changed_ops") or []
    finals = record.get("final_outputs") or {}
    ran = (
        "instrumentation changed what ran"
        + (
            f" (fusion/placement of {', '.join(changed[:6])}{' ...' if len(changed) > 6 else ''})"
            if changed
            else ""
        )
        if record.get("changed_what_ran")
        else "instrumentation changed nothing that ran"
    )
    copies = sum(n for nodes in (record.get("copies_added") or {}).values() for n in nodes.values())
    if copies:
        ran += f"; {copies} XNNPACK copy node(s) added to hand tapped values out"
    elided = record.get("elided_ops") or []
    if elided:
        ran += f"; {len(elided)} op(s) XNNPACK elides (no kernel of their own) not tapped"
    unlowered = record.get("refused_by_lowering") or []
    if unlowered:
        ran += f"; not tapped, ExecuTorch would not lower their taps: {', '.join(unlowered[:6])}"
    refused = len(record.get("refused") or [])
    return (
        f"instrumentation (tap): {record.get('ops_with_rows')} of {record.get('ops_delegated')} "
        f"delegated ops have rows; {ran}; final outputs "
        f"{'bit-equal' if finals.get('bit_equal') else 'differ'} ({finals.get('rule')}); "
        f"{refused} tapped value(s) refused"
    )
