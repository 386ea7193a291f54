"""A precision search's sensitivity table: `sensitivity.csv`, `sensitivity.svg` and a Model
Explorer overlay (`explorer_sensitivity.json`, keyed by the exported program's node names)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.analyze.link.event_table import write_csv
from stages.analyze.report.model_explorer_overlay import EXACT_SNR_DB, Overlay, encode_overlay
from stages.analyze.report.plots import plot_sensitivity
from stages.safe_io.atomic_write import write_text_atomic

COLUMNS = ("op", "snr_only_low_db", "snr_only_float_db", "met_only_float")
_GRADIENT = (
    {"stop": 0, "bgColor": "#ffffff", "textColor": "#000000"},
    {"stop": 1, "bgColor": "#c51b8a", "textColor": "#ffffff"},
)


@dataclass(frozen=True)
class Sensitivity:
    """One op: the end-to-end SNR with only it low precision, and with only it kept float."""

    op: str
    snr_only_low_db: float | None
    snr_only_float_db: float | None
    met_only_float: bool | None


def _capped(value: float | None) -> float:
    if value is None or math.isnan(value):
        return 0.0
    return max(-EXACT_SNR_DB, min(EXACT_SNR_DB, value))


def sensitivity_overlay(table: Sequence[Sensitivity], budget_db: float) -> Overlay:
    """Per op, by how many dB the output SNR falls short of the budget when only that op is low
    precision (0: it alone keeps the budget)."""
    overlay = Overlay(
        name=f"precision sensitivity: dB below the {budget_db:g} dB budget with only this op "
        "low precision",
        gradient=[dict(g) for g in _GRADIENT],
    )
    for row in table:
        short = max(0.0, budget_db - _capped(row.snr_only_low_db))
        overlay.results[row.op] = {"value": round(short, 3)}
    return overlay


def write_sensitivity_files(
    out_dir: Path, table: Sequence[Sensitivity], budget_db: float
) -> dict[str, Any]:
    """Write the three files; their paths for search.json, with the table itself."""
    out_dir.mkdir(parents=True, exist_ok=True)
    records = [{c: getattr(row, c) for c in COLUMNS} for row in table]
    csv_path, svg_path = out_dir / "sensitivity.csv", out_dir / "sensitivity.svg"
    overlay_path = out_dir / "explorer_sensitivity.json"
    write_csv(csv_path, COLUMNS, records)
    plot_sensitivity(
        svg_path,
        [r.op for r in table],
        [_capped(r.snr_only_low_db) for r in table],
        [_capped(r.snr_only_float_db) for r in table],
        budget_db,
    )
    write_text_atomic(overlay_path, encode_overlay(sensitivity_overlay(table, budget_db)))
    return {
        "sensitivity": records,
        "sensitivity_files": {
            "table": str(csv_path),
            "plot": str(svg_path),
            "overlay": str(overlay_path),
        },
    }
