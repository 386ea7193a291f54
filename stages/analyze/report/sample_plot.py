"""The per-op error distribution over the evaluation samples: a box and the samples' points of
each op's local SNR, for the ops with the largest gaps, the worst sample named beside its box.
One sample's SNR of an op hides whether its error repeats (a kernel fault) or scatters
(rounding); the spread over samples shows it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.report.plots import (
    LOCAL_COLOR,
    MARKER_COLOR,
    MAX_LABEL,
    MONO_CHAR_IN,
    Margins,
    _figure,
    _save,
)

SAMPLE_SPREAD_SVG = "sample_spread.svg"


@dataclass(frozen=True)
class OpSpread:
    """One op's per-sample SNR (dB, finite ones only) and its worst sample."""

    label: str
    values: list[float]
    worst_sample: int
    diverged: bool


def _rank_key(gap: dict[str, Any]) -> tuple[bool, float]:
    """Diverged rows first, then the largest excess (or the lowest local SNR median)."""
    excess = gap.get("excess_db")
    if isinstance(excess, int | float) and not math.isnan(excess):
        badness = float(excess)
    else:
        badness = -float(gap.get("local_snr_median_db", gap.get("accumulated_snr_median_db", 0.0)))
    return (not gap.get("diverged"), -badness)


def spreads(gaps: list[dict[str, Any]], rows: list[GapRow], top_k: int) -> list[OpSpread]:
    """The `top_k` compared float rows with the largest gaps that hold two or more samples with
    a finite SNR (an exact op has no spread to draw), worst first."""
    by_key = {(r.group, r.output_index): r for r in rows}
    found: list[OpSpread] = []
    for gap in sorted((g for g in gaps if "worst_sample" in g), key=_rank_key):
        row = by_key.get((gap["group"], gap["output_index"]))
        values = [v for _, v in row.sample_snr if math.isfinite(v)] if row is not None else []
        if len(values) < 2:
            continue
        label = "+".join(gap.get("op_names") or []) or f"group {gap['group']}"
        found.append(OpSpread(label, values, int(gap["worst_sample"]), bool(gap.get("diverged"))))
        if len(found) == top_k:
            break
    return found


def plot_sample_spread(path: Path, ops: list[OpSpread], samples: int) -> None:
    """Horizontal boxes of each op's per-sample local SNR, its samples as points; diverged ops'
    names in red; the worst sample's index at its point."""
    shown = [f"{op.label[:MAX_LABEL]}" for op in ops]
    widest = max((len(label) for label in shown), default=0)
    margins = Margins(left=widest * MONO_CHAR_IN + 0.2, right=0.6, bottom=0.55, top=0.35)
    with _figure(9.0, 1.2 + 0.36 * max(len(shown), 1), margins) as figure:
        axes = figure.add_subplot()
        positions = list(range(len(ops)))
        axes.boxplot(
            [op.values for op in ops],
            positions=positions,
            orientation="horizontal",
            widths=0.6,
            showfliers=False,
        )
        for y, op in zip(positions, ops, strict=True):
            spread = [y + 0.25 * ((i * 0.618) % 1.0 - 0.5) for i in range(len(op.values))]
            axes.scatter(op.values, spread, s=6, color=LOCAL_COLOR, alpha=0.6, gid=f"samples_{y}")
            axes.annotate(
                f"worst: sample {op.worst_sample}",
                (min(op.values), y),
                xytext=(0, 7),
                textcoords="offset points",
                fontsize=7,
                ha="center",
            )
        axes.set_yticks(positions, shown, fontfamily="monospace", fontsize=8)
        for tick, op in zip(axes.get_yticklabels(), ops, strict=True):
            if op.diverged:
                tick.set_color(MARKER_COLOR)
        axes.invert_yaxis()
        axes.set_xlabel("local SNR per sample (dB)")
        axes.set_title(f"Error over {samples} samples, ops with the largest gaps")
        axes.grid(axis="x", color="#e5e5e5")
        _save(figure, path)
