"""The analyze stage's files: events.csv and numeric_gap.csv, plots, summary.json and
report.html."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.link.event_table import EVENT_COLUMNS, write_csv
from stages.analyze.report.html_report import render_report, write_report
from stages.analyze.report.plots import has_inexact, plot_gap, plot_top_ops
from stages.analyze.report.sample_plot import SAMPLE_SPREAD_SVG, plot_sample_spread, spreads
from stages.analyze.report.summary import clean, slowest_ops
from stages.formats.artifacts import ArtifactName
from stages.safe_io.json_text import write_json_atomic

TOP_OPS_SVG = "top_ops_p50.svg"


GAP_SVG = "numeric_gap.svg"


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_json_atomic(path, data, indent=2)


def write_plots(
    run_dir: Path,
    summary: dict[str, Any],
    events: list[dict[str, Any]],
    gap_table: tuple[list[dict[str, Any]], list[GapRow]],
    top_k: int,
) -> list[Path]:
    """The slowest ops, the gap along the graph and the error over samples (each when it has
    something to show)."""
    gaps, rows = gap_table  # numeric_gap.csv's records and the rows behind them
    plots: list[Path] = []
    slowest = slowest_ops(events, top_k)
    if slowest:
        plot_top_ops(
            run_dir / TOP_OPS_SVG,
            ["+".join(e["op_names"]) or e["event_name"] for e in slowest],
            [e["p50"] for e in slowest],
            [bool(e["is_delegated_op"]) for e in slowest],
            summary["time_unit"],
        )
        plots.append(run_dir / TOP_OPS_SVG)
    metric = summary["gap_metric"]
    compared = [g for g in gaps if g["status"] == "ok" and metric in g]
    values = [float(g[metric]) for g in compared]
    if compared and has_inexact(values, bool(summary["higher_is_better"])):
        first = summary["first_divergence"]
        first_x = (
            next((i for i, g in enumerate(compared) if g["group"] == first["group"]), None)
            if first
            else None
        )
        plot_gap(
            run_dir / GAP_SVG,
            [float(g[metric]) for g in compared],
            [float(g.get(f"local_{metric}", g[metric])) for g in compared],
            summary["threshold"],
            metric,
            first_x,
        )
        plots.append(run_dir / GAP_SVG)
    spread = spreads(gaps, rows, top_k)
    if spread:
        samples = max(len(r.sample_snr) for r in rows)
        plot_sample_spread(run_dir / SAMPLE_SPREAD_SVG, spread, samples)
        plots.append(run_dir / SAMPLE_SPREAD_SVG)
    return plots


def write_tables(
    run_dir: Path, events: list[dict[str, Any]], gaps: list[dict[str, Any]]
) -> tuple[Path, Path]:
    """events.csv and numeric_gap.csv (float and exact rows share the gap table)."""
    events_path = run_dir / ArtifactName.EVENTS_CSV
    gap_path = run_dir / ArtifactName.NUMERIC_GAP_CSV
    write_csv(events_path, EVENT_COLUMNS, events)
    columns = tuple(dict.fromkeys(key for g in gaps for key in g))
    write_csv(gap_path, columns or ("group", "status"), gaps)
    return events_path, gap_path


def write_summary_and_report(
    run_dir: Path,
    summary: dict[str, Any],
    tables: tuple[Path, Path, Path],
    plots: list[Path],
    graph: Any,
    rows: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    seconds: dict[str, float],
) -> tuple[Path, Path]:
    """summary.json (with where every artifact is and the stage's timings) and report.html."""
    events_path, gap_path, trace_path = tables
    summary_path = run_dir / ArtifactName.SUMMARY_JSON
    report_path = run_dir / ArtifactName.REPORT_HTML
    summary["artifacts"] = {
        "events": str(events_path),
        "numeric_gap": str(gap_path),
        "trace": str(trace_path),
        "report": str(report_path),
        "plots": [str(p) for p in plots],
        "overlays": [str(p) for p in graph.overlays],
    }
    summary["seconds"] = {
        "link": seconds["link"],
        "numeric_gap": seconds["numeric_gap"],
        "total": time.perf_counter() - seconds["started"],
    }
    cleaned_summary = clean(summary)
    write_json(summary_path, cleaned_summary)
    events, gaps = [clean(e) for e in rows[0]], [clean(g) for g in rows[1]]
    report = render_report(cleaned_summary, events, gaps, plots, graph.report_section)
    write_report(report_path, report)
    return summary_path, report_path
