"""The analyze stage's graph outputs: Model Explorer overlay files and the report's graph view."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.analyze.link.linking import ProgramIndex
from stages.analyze.report.graph_view import render_graph_view
from stages.analyze.report.model_explorer_overlay import write_overlays
from stages.analyze.report.node_facts import GapScale, build_node_facts
from stages.formats.etrecord import ETRecord

EXPLORE_COMMAND = "python -m pipeline.tools.explore {run_dir}"


@dataclass(frozen=True)
class GraphOutputs:
    """Overlay files written, and the HTML section for report.html."""

    overlays: tuple[Path, ...]
    report_section: str


def write_graph_outputs(
    run_dir: Path,
    record: ETRecord | None,
    index: ProgramIndex,
    events: list[dict[str, Any]],
    gaps: list[dict[str, Any]],
    summary: dict[str, Any],
) -> GraphOutputs:
    """Nothing without an ETRecord (no node names to key by); else overlays + report section."""
    if record is None or not index.handles:
        return GraphOutputs(write_overlays(run_dir, [], None, ""), "")  # clears stale overlays
    threshold = summary.get("threshold")
    scale = GapScale(
        str(summary.get("gap_metric", "")),
        float(threshold) if isinstance(threshold, int | float) else None,
        bool(summary.get("higher_is_better", True)),
    )
    first = summary.get("first_divergence") or {}
    nodes = build_node_facts(
        index.handles,
        index.maps,
        list(record.lowering_info.get("rejected_ops", [])),
        events,
        gaps,
        scale,
        first.get("debug_handles", []),
    )
    unit = str(summary.get("time_unit", "ms"))
    overlays = write_overlays(run_dir, nodes, scale, unit)
    command = EXPLORE_COMMAND.format(run_dir=run_dir)
    return GraphOutputs(overlays, render_graph_view(nodes, scale, unit, command))
