"""The hand-written SVG charts: well-formed XML, labels escaped, bars and lines where the data says."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stages.analyze.report.plots import plot_gap, plot_top_ops
from stages.analyze.report.svg_charts import Point, scatter_chart, tick_values

SVG = "{http://www.w3.org/2000/svg}"


def _parse(path: Path) -> ET.Element:
    root = ET.fromstring(path.read_text(encoding="utf-8"))
    assert root.tag == f"{SVG}svg"
    assert float(root.attrib["width"]) > 0 and float(root.attrib["height"]) > 0
    return root


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [(0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]), (0, 37, [0, 10, 20, 30]), (-3, 3, [-2, 0, 2])],
)
def test_ticks_are_round_and_cover_the_range(lo: float, hi: float, expected: list[float]) -> None:
    assert tick_values(lo, hi) == pytest.approx(expected)


def test_bars_are_proportional_and_hostile_labels_are_text(tmp_path: Path) -> None:
    hostile = "</text><script>alert(1)</script>&"
    path = tmp_path / "top.svg"
    plot_top_ops(
        path, ["aten.linear", hostile, "aten.add"], [4.0, 2.0, 1.0], [True, False, True], "ms"
    )
    root = _parse(path)
    assert not list(root.iter(f"{SVG}script"))
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert hostile in texts and "p50 (ms)" in texts
    bars = [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    widths = [float(b.attrib["width"]) for b in bars]
    assert widths[0] > widths[1] > widths[2] > 0
    assert widths[0] / widths[1] == pytest.approx(2.0, rel=0.01)
    assert widths[1] / widths[2] == pytest.approx(2.0, rel=0.01)
    assert [b.attrib["fill"] for b in bars] == ["#3b7dd8", "#e08a2c", "#3b7dd8"]


def test_gap_lines_clip_infinities_and_mark_threshold_and_divergence(tmp_path: Path) -> None:
    path = tmp_path / "gap.svg"
    plot_gap(path, [math.inf, 40.0, 10.0], [math.inf, 45.0, math.nan], 26.0, "snr", 2)
    root = _parse(path)
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 2
    ys = [[float(p.split(",")[1]) for p in line.attrib["points"].split()] for line in lines]
    assert ys[0][0] < ys[0][1] < ys[0][2]  # +inf clipped to the top edge, then lower values
    assert ys[1][2] > ys[0][2]  # nan drawn at the bottom edge, below 10 dB
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "threshold 26" in texts and "first divergence" in texts


def test_scatter_skips_non_finite_points() -> None:
    svg = scatter_chart(
        [Point(1.0, 2.0, "vit/xnnpack"), Point(math.nan, 1.0, "bad"), Point(3.0, 5.0, "mlp/qnn")],
        "t",
        ("x", "y"),
    )
    root = ET.fromstring(svg)
    assert [c.find(f"{SVG}title").text for c in root.iter(f"{SVG}circle")] == [  # type: ignore[union-attr]
        "vit/xnnpack",
        "mlp/qnn",
    ]
    # The rightmost point's label runs leftwards, so it stays inside the picture.
    labels = {t.text: t.attrib.get("text-anchor") for t in root.iter(f"{SVG}text")}
    assert labels["mlp/qnn"] == "end" and labels["vit/xnnpack"] is None
