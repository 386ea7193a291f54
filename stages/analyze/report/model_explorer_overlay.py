"""Model Explorer node-data files: latency, gaps, placement and divergence on the exported graph.

Keyed the way Model Explorer's PyTorch adapter keys `exported.pt2`: one graph with id "graph",
nodes by fx node name. Built with `model_explorer.node_data_builder` when the `[explorer]` extra
is installed; otherwise the same JSON is written directly (no dependency at run time).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from stages.analyze.report.node_facts import DELEGATED, LEFT_OUT, GapScale, NodeFacts
from stages.safe_io.atomic_write import write_text_atomic

# The id Model Explorer's built-in PyTorch adapter gives the one graph of an exported program.
ADAPTER_GRAPH_ID = "graph"
EXACT_SNR_DB = 300.0  # an exact match (SNR = inf) is drawn at this many dB
_LARGEST = 1e300
_GREEN, _RED, _MAGENTA = "#b7e1b0", "#f4a3a3", "#c51b8a"
_LATENCY_GRADIENT = (
    {"stop": 0, "bgColor": "#fff7ec", "textColor": "#000000"},
    {"stop": 0.5, "bgColor": "#fc8d59", "textColor": "#000000"},
    {"stop": 1, "bgColor": "#b30000", "textColor": "#ffffff"},
)
_PARTITION_COLORS = ("#a6cee3", "#b2df8a", "#cab2d6", "#fdbf6f", "#8dd3c7", "#bebada", "#80b1d3")
_LEFT_OUT_COLOR, _NOT_DELEGATED_COLOR = "#fb9a99", "#e0e0e0"


class OverlayFile(StrEnum):
    """Node-data files the analyze stage writes next to its other artifacts."""

    LATENCY = "explorer_latency.json"
    LOCAL_GAP = "explorer_local_gap.json"
    ACCUMULATED_GAP = "explorer_accumulated_gap.json"
    PLACEMENT = "explorer_placement.json"
    DIVERGENCE = "explorer_divergence.json"


@dataclass
class Overlay:
    """One node-data set: per-node values and how to colour them (Model Explorer's fields)."""

    name: str
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    thresholds: list[dict[str, Any]] = field(default_factory=list)
    gradient: list[dict[str, Any]] = field(default_factory=list)


def latency_overlay(nodes: Sequence[NodeFacts], unit: str) -> Overlay:
    """p50 per op; a fused kernel's (or shared handle's) p50 is split evenly over its ops."""
    overlay = Overlay(
        name=f"latency p50 ({unit}) per op; a fused delegate kernel's p50 is split evenly "
        "over the ops it covers",
        gradient=[dict(g) for g in _LATENCY_GRADIENT],
    )
    for node in nodes:
        if node.latency is not None:
            overlay.results[node.name] = {"value": node.latency}
    return overlay


def _display_gap(value: float, metric: str) -> float:
    cap = EXACT_SNR_DB if metric == "snr" else _LARGEST
    return max(-cap, min(cap, value))


def gap_overlay(nodes: Sequence[NodeFacts], scale: GapScale, local: bool) -> Overlay:
    """Local or accumulated gap per op, coloured by the threshold; the first divergence magenta."""
    kind = "local" if local else "accumulated"
    better = "higher" if scale.higher_is_better else "lower"
    exact = f"; an exact match is shown as {EXACT_SNR_DB:g}" if scale.metric == "snr" else ""
    overlay = Overlay(
        name=f"{kind} gap: {scale.metric} ({better} is better, threshold {scale.threshold}); "
        f"first divergence in magenta{exact}"
    )
    if scale.threshold is not None:
        low, high = (_RED, _GREEN) if scale.higher_is_better else (_GREEN, _RED)
        overlay.thresholds = [
            {"value": scale.threshold, "bgColor": low},
            {"value": _LARGEST, "bgColor": high},
        ]
    else:
        overlay.gradient = [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#6baed6"}]
    for node in nodes:
        value = node.local_gap if local else node.accumulated_gap
        if value is None:
            continue
        result: dict[str, Any] = {"value": _display_gap(value, scale.metric)}
        if node.first_divergence:
            result.update(bgColor=_MAGENTA, textColor="#ffffff")
        overlay.results[node.name] = result
    return overlay


def placement_overlay(nodes: Sequence[NodeFacts]) -> Overlay:
    """Backend and partition each op ran in, or 'left out: reason'."""
    overlay = Overlay(name="placement: delegate partition each op ran in, or why it was left out")
    for node in nodes:
        place = node.placement
        if place.kind == DELEGATED:
            color = _PARTITION_COLORS[(place.partition_id or 0) % len(_PARTITION_COLORS)]
        else:
            color = _LEFT_OUT_COLOR if place.kind == LEFT_OUT else _NOT_DELEGATED_COLOR
        overlay.results[node.name] = {"value": place.label(), "bgColor": color}
    return overlay


def divergence_overlay(nodes: Sequence[NodeFacts]) -> Overlay:
    """'first divergence' / 'diverged' / 'within threshold' on every compared op."""
    overlay = Overlay(name="divergence: first divergence, diverged, or within threshold")
    for node in nodes:
        if not node.gap_statuses:
            continue
        if node.first_divergence:
            value, color = "first divergence", _MAGENTA
        elif node.diverged:
            value, color = "diverged", _RED
        else:
            value, color = "within threshold", _GREEN
        overlay.results[node.name] = {"value": value, "bgColor": color}
    return overlay


def _plain(overlay: Overlay) -> dict[str, Any]:
    """The dict node_data_builder's GraphNodeData serialises to (same keys, same order)."""
    return {
        "results": overlay.results,
        "name": overlay.name,
        "thresholds": overlay.thresholds,
        "gradient": overlay.gradient,
        "hideInAggregatedStatsTable": False,
        "hideInChildrenStatsTable": False,
        "showExpandedSummaryOnGroupNode": False,
        "showLabelCountColumnsInChildrenStatsTable": False,
    }


def encode_overlay(overlay: Overlay, graph_id: str = ADAPTER_GRAPH_ID) -> str:
    """Model-level node data ({graph id: graph node data}) as a JSON string.

    Written by hand, byte for byte what node_data_builder writes (a test compares the two):
    importing Model Explorer's package costs the analyze stage ~0.4 s.
    """
    return json.dumps({graph_id: _plain(overlay)}, allow_nan=False)


def build_overlays(
    nodes: Sequence[NodeFacts], scale: GapScale | None, unit: str
) -> dict[OverlayFile, Overlay]:
    """Every overlay there is data for (gap overlays only when outputs were compared)."""
    overlays = {
        OverlayFile.LATENCY: latency_overlay(nodes, unit),
        OverlayFile.PLACEMENT: placement_overlay(nodes),
    }
    if scale is not None and any(n.gap_statuses for n in nodes):
        overlays[OverlayFile.LOCAL_GAP] = gap_overlay(nodes, scale, local=True)
        overlays[OverlayFile.ACCUMULATED_GAP] = gap_overlay(nodes, scale, local=False)
        overlays[OverlayFile.DIVERGENCE] = divergence_overlay(nodes)
    return overlays


def write_overlays(
    run_dir: Path, nodes: Sequence[NodeFacts], scale: GapScale | None, unit: str
) -> tuple[Path, ...]:
    """Write the overlay files atomically; returns their paths (nothing without nodes).

    Overlay files of an earlier analysis in run_dir that this one has no data for are removed,
    so a viewer never mixes two analyses.
    """
    overlays = build_overlays(nodes, scale, unit) if nodes else {}
    for stale in set(OverlayFile) - set(overlays):
        (run_dir / stale).unlink(missing_ok=True)
    paths = []
    for name, overlay in overlays.items():
        if not all(_finite(r["value"]) for r in overlay.results.values()):
            raise ValueError(f"{name}: non-finite value in an overlay")  # a bug, never user input
        write_text_atomic(run_dir / name, encode_overlay(overlay))
        paths.append(run_dir / name)
    return tuple(paths)


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
