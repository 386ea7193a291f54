"""The top rows of a sweep's per-op comparison as text, printed with the sweep's summary (the
whole table is comparison_ops_<model>.csv)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pipeline.sweeps.op_alignment import OpRow

TOP_ROWS = 8


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def format_op_rows(model: str, ops: Sequence[OpRow], top: int = TOP_ROWS) -> str:
    """The `top` slowest op groups (largest p50 of any run) with each run's p50 and local gap."""
    if not ops:
        return ""
    labels = list(dict.fromkeys(label for op in ops for label in [*op.p50_ms, *op.local_gap]))
    ranked = sorted(ops, key=lambda op: -max(op.p50_ms.values(), default=0.0))[:top]
    metric = next((op.metric for op in ops if op.metric), "gap")
    header = [f"per-op comparison of {model}: the {len(ranked)} slowest of {len(ops)} op groups"]
    columns = ["op"] + [f"p50 ms [{label}]" for label in labels]
    columns += [f"local {metric} [{label}]" for label in labels]
    rows = [
        [op.op[:40]]
        + [_fmt(op.p50_ms.get(label)) for label in labels]
        + [_fmt(op.local_gap.get(label)) for label in labels]
        for op in ranked
    ]
    widths = [max(len(c), *(len(r[k]) for r in rows)) for k, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(widths[k]) for k, c in enumerate(columns))]
    lines += ["  ".join(v.ljust(widths[k]) for k, v in enumerate(r)) for r in rows]
    return "\n".join(header + lines)
