"""SVG plots: top ops by p50; accumulated and local gap along the graph with threshold and verdict."""

from __future__ import annotations

import math
from pathlib import Path

from stages.analyze.report.svg_charts import (
    Marker,
    Point,
    Series,
    bar_chart,
    line_chart,
    scatter_chart,
)
from stages.formats.atomic_write import write_text_atomic

DELEGATED_COLOR = "#3b7dd8"
OPERATOR_COLOR = "#e08a2c"


def plot_top_ops(
    path: Path, labels: list[str], p50: list[float], delegated: list[bool], unit: str
) -> None:
    colors = [DELEGATED_COLOR if d else OPERATOR_COLOR for d in delegated]
    kinds = [(DELEGATED_COLOR, "inside a delegate"), (OPERATOR_COLOR, "operator")]
    legend = [(color, name) for color, name in kinds if color in colors]  # only what is drawn
    svg = bar_chart(labels, p50, colors, "Slowest ops by p50", f"p50 ({unit})", legend=legend)
    write_text_atomic(path, svg)


def _clip(values: list[float], floor: float, ceiling: float) -> list[float]:
    out = []
    for v in values:
        if math.isnan(v):
            out.append(floor)
        else:
            out.append(min(max(v, floor), ceiling))
    return out


def plot_gap(
    path: Path,
    accumulated: list[float],
    local: list[float],
    threshold: float | None,
    metric: str,
    first_divergence: int | None,
) -> None:
    """x: compared outputs in graph order. Non-finite values are clipped to the plot's edges."""
    finite = [v for v in accumulated + local if math.isfinite(v)]
    lo = min([*finite, threshold if threshold is not None else 0.0], default=0.0)
    hi = max([*finite, threshold if threshold is not None else 1.0], default=1.0)
    pad = (hi - lo) * 0.1 or 1.0
    floor, ceiling = lo - pad, hi + pad
    series = [
        Series("accumulated gap", _clip(accumulated, floor, ceiling), "#3b7dd8"),
        Series("local gap", _clip(local, floor, ceiling), "#2ca25f", dashed=True),
    ]
    markers = []
    if threshold is not None:
        markers.append(Marker(f"threshold {threshold:g}", threshold, "#d62728"))
    if first_divergence is not None:
        markers.append(Marker("first divergence", first_divergence, "#d62728", vertical=True))
    svg = line_chart(
        series,
        markers,
        (floor, ceiling),
        f"Numeric gap along the graph ({metric}; ∞ drawn at the top edge)",
        ("compared output (graph order)", metric),
    )
    write_text_atomic(path, svg)


def has_inexact(values: list[float], higher_is_better: bool) -> bool:
    """Whether a gap plot would show anything: some value is not an exact match (SNR = inf for
    higher-is-better metrics, 0 for errors). An all-exact run is said in words, not drawn."""
    exact = math.inf if higher_is_better else 0.0
    return any(v != exact for v in values)


def _span(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return (max(finite) - min(finite)) if len(finite) > 1 else 0.0


def merge_close_labels(points: list[Point], tolerance: float = 0.08) -> list[Point]:
    """Points closer than `tolerance` of the data's span on both axes share one label (on the
    first of them, the names joined), so labels of near points are not drawn over each other."""
    x_span = _span([p.x for p in points]) or 1.0
    y_span = _span([p.y for p in points]) or 1.0
    owners: list[tuple[Point, list[str]]] = []
    placed: list[Point] = []
    for point in points:
        owner = next(
            (
                (head, names)
                for head, names in owners
                if abs(head.x - point.x) <= tolerance * x_span
                and abs(head.y - point.y) <= tolerance * y_span
            ),
            None,
        )
        if owner is None:
            owners.append((point, [point.label]))
        else:
            owner[1].append(point.label)
        placed.append(point)
    shared = {id(head): "; ".join(names) for head, names in owners}
    return [Point(p.x, p.y, shared.get(id(p), "")) for p in placed]


def plot_points(path: Path, points: list[Point], title: str, labels: tuple[str, str]) -> None:
    """Labelled points (a sweep's runs: latency against gap); near points share one label."""
    write_text_atomic(path, scatter_chart(merge_close_labels(points), title, labels))
