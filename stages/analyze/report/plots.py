"""SVG plots drawn with matplotlib: top ops by p50; accumulated and local gap along the graph with
threshold and first divergence; labelled points (a sweep's latency against gap).

matplotlib is imported when a plot is drawn, never at module import (the stage runner's `--help`
and config errors stay fast). Figures are `matplotlib.figure.Figure` objects (no pyplot global
state). Text stays text (`svg.fonttype: none`, so op names are searchable), matplotlib's SVG writer
escapes it, and mathtext is off, so a `$` in an op or model name from a hostile file is only a
character.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stages.safe_io.atomic_write import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DELEGATED_COLOR = "#3b7dd8"
OPERATOR_COLOR = "#e08a2c"
ACCUMULATED_COLOR = "#3b7dd8"
LOCAL_COLOR = "#2ca25f"
MARKER_COLOR = "#d62728"
MAX_LABEL = 60  # characters of an op name shown beside its bar


@dataclass(frozen=True)
class Point:
    """One labelled point of a scatter plot."""

    x: float
    y: float
    label: str


MONO_CHAR_IN = 8.0 * 0.602 / 72  # a monospace 8 pt character's width (DejaVu Sans Mono), inches


@dataclass(frozen=True)
class Margins:
    """Fixed margins around one axes, inches: a figure drawn once, where matplotlib's constrained
    layout draws it again to measure (half a plot's time)."""

    left: float
    right: float
    bottom: float
    top: float


@contextmanager
def _figure(width_in: float, height_in: float, margins: Margins | None = None) -> Iterator[Figure]:
    """A new figure under the plots' style settings; constrained layout unless `margins`."""
    import matplotlib
    from matplotlib.figure import Figure

    # Text as text, no mathtext, fixed ids (with no date in the metadata: same bytes, same data).
    with matplotlib.rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "delegate-debugger",
            "text.parse_math": False,
            "font.size": 9.0,
        }
    ):
        if margins is None:
            yield Figure(figsize=(width_in, height_in), layout="constrained")
            return
        figure = Figure(figsize=(width_in, height_in))
        figure.subplots_adjust(
            left=min(margins.left / width_in, 0.8),
            right=1.0 - margins.right / width_in,
            bottom=margins.bottom / height_in,
            top=1.0 - margins.top / height_in,
        )
        yield figure


def _save(figure: Figure, path: Path) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="svg", metadata={"Date": None})


def plot_top_ops(
    path: Path, labels: list[str], p50: list[float], delegated: list[bool], unit: str
) -> None:
    """Horizontal bars, slowest on top; delegated ops and operators in two colors."""
    from matplotlib.patches import Patch

    shown = [label[:MAX_LABEL] for label in labels]
    widest = max((len(label) for label in shown), default=0)
    margins = Margins(left=widest * MONO_CHAR_IN + 0.2, right=0.2, bottom=0.5, top=0.3)
    with _figure(9.0, 1.2 + 0.28 * max(len(shown), 1), margins) as figure:
        axes = figure.add_subplot()
        values = [v if math.isfinite(v) else 0.0 for v in p50]
        colors = [DELEGATED_COLOR if d else OPERATOR_COLOR for d in delegated]
        bars = axes.barh(range(len(shown)), values, color=colors)
        for index, bar in enumerate(bars):
            bar.set_gid(f"bar_{index}")
        axes.set_yticks(range(len(shown)), shown, fontfamily="monospace", fontsize=8)
        axes.invert_yaxis()
        axes.set_xlabel(f"p50 ({unit})")
        axes.set_title("Slowest ops by p50")
        axes.grid(axis="x", color="#e5e5e5")
        axes.set_axisbelow(True)
        kinds = [(DELEGATED_COLOR, "inside a delegate"), (OPERATOR_COLOR, "operator")]
        legend = [Patch(color=c, label=name) for c, name in kinds if c in colors]  # drawn only
        if legend:
            axes.legend(handles=legend, loc="lower right")
        _save(figure, path)


def _clip(values: Sequence[float], floor: float, ceiling: float) -> list[float]:
    """Values inside [floor, ceiling]; NaN at the floor, infinities at the edges."""
    return [floor if math.isnan(v) else min(max(v, floor), ceiling) for v in values]


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
    with _figure(10.0, 4.6, Margins(left=0.8, right=0.2, bottom=1.0, top=0.3)) as figure:
        axes = figure.add_subplot()
        lines: list[Any] = []
        lines += axes.plot(_clip(accumulated, floor, ceiling), color=ACCUMULATED_COLOR)
        lines += axes.plot(_clip(local, floor, ceiling), color=LOCAL_COLOR, linestyle="--")
        lines[0].set(label="accumulated gap", gid="accumulated")
        lines[1].set(label="local gap", gid="local")
        if threshold is not None:
            axes.axhline(threshold, color=MARKER_COLOR, label=f"threshold {threshold:g}")
        if first_divergence is not None:
            axes.axvline(
                first_divergence, color=MARKER_COLOR, linestyle=":", label="first divergence"
            )
        axes.set_ylim(floor, ceiling)
        axes.set_xlabel("compared output (graph order)")
        axes.set_ylabel(metric)
        axes.set_title(f"Numeric gap along the graph ({metric}; ∞ drawn at the top edge)")
        axes.grid(color="#e5e5e5")
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=4)
        _save(figure, path)


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
    """Labelled points (a sweep's runs), one colour per point's series; near points share one
    label; non-finite points are left out."""
    shown = merge_close_labels([p for p in points if math.isfinite(p.x) and math.isfinite(p.y)])
    with _figure(8.0, 5.0) as figure:
        axes = figure.add_subplot()
        palette = matplotlib_colors()
        for index, p in enumerate(shown):
            axes.scatter([p.x], [p.y], color=palette[index % len(palette)], gid=f"dot_{index}")
        axes.margins(0.15)
        middle = sum(axes.get_xlim()) / 2
        for index, p in enumerate(shown):
            if not p.label:
                continue  # it shares the label of a point next to it
            right_half = p.x > middle  # its label runs leftwards, inside the plot
            axes.annotate(
                p.label,
                (p.x, p.y),
                xytext=(-6 if right_half else 6, 6),
                textcoords="offset points",
                ha="right" if right_half else "left",
                color=palette[index % len(palette)],
                gid=f"point_{index}",
            )
        axes.set_xlabel(labels[0])
        axes.set_ylabel(labels[1])
        axes.set_title(title)
        axes.grid(color="#e5e5e5")
        _save(figure, path)


def matplotlib_colors() -> list[str]:
    """The qualitative palette points are told apart by (matplotlib's tab10)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    tab10 = colormaps["tab10"]
    return [to_hex(tab10(i)) for i in range(tab10.N)]


def plot_sensitivity(
    path: Path, ops: list[str], only_low: list[float], only_float: list[float], budget: float
) -> None:
    """Per op, the end-to-end SNR with only it low precision and with only it kept float,
    against the accuracy budget (a precision search's sensitivity table)."""
    shown = [op[:MAX_LABEL] for op in ops]
    with _figure(9.0, 1.4 + 0.36 * max(len(shown), 1)) as figure:
        axes = figure.add_subplot()
        rows = list(range(len(shown)))
        low = _clip(only_low, -50.0, 150.0)
        kept = _clip(only_float, -50.0, 150.0)
        axes.barh(
            [r - 0.2 for r in rows],
            low,
            height=0.4,
            color=OPERATOR_COLOR,
            label="only this op low precision",
        )
        axes.barh(
            [r + 0.2 for r in rows],
            kept,
            height=0.4,
            color=DELEGATED_COLOR,
            label="only this op kept float",
        )
        axes.axvline(budget, color=MARKER_COLOR, linestyle="--", label=f"budget {budget:g} dB")
        axes.set_yticks(rows, shown, fontfamily="monospace", fontsize=8)
        axes.invert_yaxis()
        axes.set_xlabel("end-to-end output SNR (dB)")
        axes.set_title("Precision sensitivity per op")
        axes.legend(loc="lower right", fontsize=8)
        _save(figure, path)
