"""A generation's analysis on disk: per-step per-op gaps and KV cache divergence (CSV), and the
gap against step and layer (SVG, shown in the report and logged to MLflow with the others)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from stages.analyze.compare.expected_error import ACCUMULATED_DB
from stages.analyze.generation.analysis import GenerationAnalysis
from stages.analyze.link.event_table import write_csv
from stages.analyze.report.generation_plot import plot_generation_gap
from stages.analyze.report.summary import clean

GENERATION_GAPS_CSV = "generation_gaps.csv"
GENERATION_KV_CSV = "generation_kv_cache.csv"
GENERATION_SVG = "generation_gap.svg"


def _worst(cells: dict[tuple[str, int], float], key: tuple[str, int], value: Any) -> None:
    if isinstance(value, int | float) and not math.isnan(value):
        cells[key] = min(cells.get(key, math.inf), float(value))


def plot_cells(
    analysis: GenerationAnalysis,
) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], float]]:
    """(layer, step) → the lowest accumulated SNR of the layer's ops, and of its caches (dB)."""
    ops: dict[tuple[str, int], float] = {}
    for record in analysis.op_records:
        _worst(ops, (str(record["layer"]), int(record["step"])), record.get(ACCUMULATED_DB))
    caches: dict[tuple[str, int], float] = {}
    for record in analysis.kv_records:
        key = (str(record["layer"]), int(record["step"]))
        for kind in ("k_snr_db", "v_snr_db"):
            _worst(caches, key, record.get(kind))
    return ops, caches


def write_generation_outputs(run_dir: Path, analysis: GenerationAnalysis) -> tuple[Path, ...]:
    """generation_gaps.csv, generation_kv_cache.csv and, when there is a gap, the SVG."""
    gaps_path, kv_path = run_dir / GENERATION_GAPS_CSV, run_dir / GENERATION_KV_CSV
    ops = [clean(r) for r in analysis.op_records]
    write_csv(gaps_path, tuple(dict.fromkeys(k for r in ops for k in r)) or ("step",), ops)
    kv = [clean(r) for r in analysis.kv_records]
    write_csv(kv_path, ("step", "layer", "k_snr_db", "v_snr_db"), kv)
    op_cells, cache_cells = plot_cells(analysis)
    if not op_cells and not cache_cells:
        return gaps_path, kv_path
    plot_generation_gap(run_dir / GENERATION_SVG, op_cells, cache_cells)
    return gaps_path, kv_path, run_dir / GENERATION_SVG
