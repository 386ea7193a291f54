"""Charts as SVG text: horizontal bars, lines along an axis, labelled points.

Written by hand so the analysis draws its plots in milliseconds without importing a plotting
library (matplotlib's import alone took ~0.6 s of the cold loop). SVG is text, scales, keeps op
names searchable, and MLflow's artifact viewer and every browser show it. Every label is
XML-escaped: op names and model names come from files the tool did not write.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = "font-family='system-ui,sans-serif'"
MONO = "font-family='ui-monospace,monospace'"
CHAR_WIDTH = 0.6  # of the font size: a monospace glyph's advance
AXIS_COLOR = "#444"
GRID_COLOR = "#e5e5e5"


@dataclass(frozen=True)
class Series:
    """One line of a line chart: y per x = 0, 1, 2, ..."""

    label: str
    values: Sequence[float]
    color: str
    dashed: bool = False


@dataclass(frozen=True)
class Marker:
    """A reference line across the plot: horizontal at y=value, or vertical at x=value."""

    label: str
    value: float
    color: str
    vertical: bool = False


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str


def _num(value: float) -> str:
    """A coordinate, short and finite."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def tick_values(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick positions (steps of 1, 2 or 5 times a power of ten) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks: list[float] = []
    value = first
    while value <= hi + step * 1e-9 and len(ticks) < 50:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value = first + step * len(ticks)
    return ticks


def tick_label(value: float) -> str:
    return f"{value:.4g}"


class _Canvas:
    """An SVG document under construction, in pixel coordinates."""

    def __init__(self, width: float, height: float, title: str) -> None:
        self.width, self.height = width, height
        self.parts = [
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{_num(width)}' "
            f"height='{_num(height)}' viewBox='0 0 {_num(width)} {_num(height)}'>",
            f"<title>{escape(title)}</title>",
            "<rect width='100%' height='100%' fill='white'/>",
            f"<text x='{_num(width / 2)}' y='20' {FONT} font-size='14' "
            f"text-anchor='middle'>{escape(title)}</text>",
        ]

    def text(
        self, x: float, y: float, content: str, size: int = 11, mono: bool = False, **attrs: str
    ) -> None:
        extra = "".join(f" {k.replace('_', '-')}='{escape(v)}'" for k, v in attrs.items())
        font = MONO if mono else FONT
        self.parts.append(
            f"<text x='{_num(x)}' y='{_num(y)}' {font} font-size='{size}'{extra}>"
            f"{escape(content)}</text>"
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, color: str, **attrs: str) -> None:
        extra = "".join(f" {k.replace('_', '-')}='{escape(v)}'" for k, v in attrs.items())
        self.parts.append(
            f"<line x1='{_num(x1)}' y1='{_num(y1)}' x2='{_num(x2)}' y2='{_num(y2)}' "
            f"stroke='{escape(color)}'{extra}/>"
        )

    def svg(self) -> str:
        return "\n".join([*self.parts, "</svg>"]) + "\n"


@dataclass(frozen=True)
class _Axis:
    """Maps data values in [lo, hi] onto pixels [start, end]."""

    lo: float
    hi: float
    start: float
    end: float

    def at(self, value: float) -> float:
        span = self.hi - self.lo or 1.0
        return self.start + (value - self.lo) / span * (self.end - self.start)


def _x_axis(canvas: _Canvas, axis: _Axis, y_top: float, y_bottom: float, label: str) -> None:
    for tick in tick_values(axis.lo, axis.hi):
        x = axis.at(tick)
        canvas.line(x, y_top, x, y_bottom, GRID_COLOR)
        canvas.text(x, y_bottom + 14, tick_label(tick), 10, text_anchor="middle")
    canvas.line(axis.start, y_bottom, axis.end, y_bottom, AXIS_COLOR)
    canvas.text((axis.start + axis.end) / 2, y_bottom + 32, label, 11, text_anchor="middle")


def _y_axis(canvas: _Canvas, axis: _Axis, x_left: float, x_right: float, label: str) -> None:
    for tick in tick_values(axis.lo, axis.hi):
        y = axis.at(tick)
        canvas.line(x_left, y, x_right, y, GRID_COLOR)
        canvas.text(x_left - 4, y + 3, tick_label(tick), 10, text_anchor="end")
    canvas.line(x_left, axis.start, x_left, axis.end, AXIS_COLOR)
    middle = (axis.start + axis.end) / 2
    canvas.text(
        14, middle, label, 11, text_anchor="middle", transform=f"rotate(-90 14 {_num(middle)})"
    )


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    colors: Sequence[str],
    title: str,
    x_label: str,
    legend: Sequence[tuple[str, str]] = (),
) -> str:
    """Horizontal bars, the first label on top; `legend` is (color, meaning) pairs."""
    shown = [label[:60] for label in labels]
    label_width = max((len(s) for s in shown), default=0) * CHAR_WIDTH * 9 + 12
    left, right, top, row = max(label_width, 60.0), 24.0, 44.0, 22.0
    width = max(640.0, left + 420.0)
    plot_bottom = top + row * max(len(shown), 1)
    canvas = _Canvas(width, plot_bottom + 48 + 16 * bool(legend), title)
    finite = [v for v in values if math.isfinite(v)]
    axis = _Axis(0.0, max([*finite, 0.0]) * 1.05 or 1.0, left, width - right)
    _x_axis(canvas, axis, top, plot_bottom, x_label)
    for i, (label, value, color) in enumerate(zip(shown, values, colors, strict=True)):
        y = top + i * row
        length = axis.at(value if math.isfinite(value) else axis.hi) - left
        canvas.parts.append(
            f"<rect x='{_num(left)}' y='{_num(y + 3)}' width='{_num(max(length, 0.0))}' "
            f"height='{_num(row - 6)}' fill='{escape(color)}'><title>{escape(label)}: "
            f"{tick_label(value)}</title></rect>"
        )
        canvas.text(left - 6, y + row / 2 + 3, label, 9, mono=True, text_anchor="end")
    for i, (color, meaning) in enumerate(legend):
        x, y = left + i * 200, plot_bottom + 52
        canvas.parts.append(
            f"<rect x='{_num(x)}' y='{_num(y - 9)}' width='10' height='10' fill='{escape(color)}'/>"
        )
        canvas.text(x + 14, y, meaning, 10)
    return canvas.svg()


def _polyline(xs: Sequence[float], ys: Sequence[float], color: str, dashed: bool) -> str:
    points = " ".join(f"{_num(x)},{_num(y)}" for x, y in zip(xs, ys, strict=True))
    dash = " stroke-dasharray='5 3'" if dashed else ""
    return (
        f"<polyline points='{points}' fill='none' stroke='{escape(color)}' "
        f"stroke-width='1.5'{dash}/>"
    )


def line_chart(
    series: Sequence[Series],
    markers: Sequence[Marker],
    y_range: tuple[float, float],
    title: str,
    labels: tuple[str, str],
) -> str:
    """Lines over x = 0..n-1 within `y_range` (values must already lie in it); a legend below."""
    width, height, left, right, top, bottom = 900.0, 400.0, 70.0, 20.0, 36.0, 60.0
    legend_rows = len(series) + len(markers)
    canvas = _Canvas(width, height + 16 * legend_rows, title)
    count = max((len(s.values) for s in series), default=1)
    x_axis = _Axis(0.0, float(max(count - 1, 1)), left, width - right)
    y_axis = _Axis(y_range[0], y_range[1], height - bottom, top)
    _x_axis(canvas, x_axis, top, height - bottom, labels[0])
    _y_axis(canvas, y_axis, left, width - right, labels[1])
    for s in series:
        xs = [x_axis.at(i) for i in range(len(s.values))]
        canvas.parts.append(_polyline(xs, [y_axis.at(v) for v in s.values], s.color, s.dashed))
    for m in markers:
        if m.vertical:
            x = x_axis.at(m.value)
            canvas.line(x, top, x, height - bottom, m.color, stroke_dasharray="2 3")
        else:
            y = y_axis.at(m.value)
            canvas.line(left, y, width - right, y, m.color)
    legend = [(s.label, s.color, s.dashed) for s in series] + [
        (m.label, m.color, m.vertical) for m in markers
    ]
    for i, (label, color, dashed) in enumerate(legend):
        y = height - 8 + 16 * i
        dash = {"stroke_dasharray": "5 3"} if dashed else {}
        canvas.line(left, y - 4, left + 24, y - 4, color, stroke_width="2", **dash)
        canvas.text(left + 30, y, label, 10)
    return canvas.svg()


def scatter_chart(points: Sequence[Point], title: str, labels: tuple[str, str]) -> str:
    """Labelled points on two linear axes."""
    width, height, left, right, top, bottom = 720.0, 460.0, 80.0, 30.0, 36.0, 56.0
    canvas = _Canvas(width, height, title)
    xs = [p.x for p in points if math.isfinite(p.x)] or [0.0, 1.0]
    ys = [p.y for p in points if math.isfinite(p.y)] or [0.0, 1.0]
    x_pad = (max(xs) - min(xs)) * 0.1 or abs(max(xs)) * 0.1 or 1.0
    y_pad = (max(ys) - min(ys)) * 0.1 or abs(max(ys)) * 0.1 or 1.0
    x_axis = _Axis(min(xs) - x_pad, max(xs) + x_pad, left, width - right)
    y_axis = _Axis(min(ys) - y_pad, max(ys) + y_pad, height - bottom, top)
    _x_axis(canvas, x_axis, top, height - bottom, labels[0])
    _y_axis(canvas, y_axis, left, width - right, labels[1])
    for p in points:
        if not (math.isfinite(p.x) and math.isfinite(p.y)):
            continue
        x, y = x_axis.at(p.x), y_axis.at(p.y)
        canvas.parts.append(
            f"<circle cx='{_num(x)}' cy='{_num(y)}' r='4' fill='#3b7dd8'>"
            f"<title>{escape(p.label)}</title></circle>"
        )
        if x > (left + width - right) / 2:  # right half: label to the left, inside the plot
            canvas.text(x - 6, y - 6, p.label, 9, text_anchor="end")
        else:
            canvas.text(x + 6, y - 6, p.label, 9)
    return canvas.svg()
