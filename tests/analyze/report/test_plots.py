"""The analysis plots (matplotlib, SVG): well-formed XML, labels kept as escaped text, bars and
lines where the data says, and no plotting library loaded until a plot is drawn."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stages.analyze.report.plots import (
    Point,
    has_inexact,
    merge_close_labels,
    plot_gap,
    plot_points,
    plot_top_ops,
)
from tests.helpers.cli_runner import REPO

SVG = "{http://www.w3.org/2000/svg}"


def _parse(path: Path) -> ET.Element:
    root = ET.fromstring(path.read_text(encoding="utf-8"))
    assert root.tag == f"{SVG}svg"
    return root


def _group(root: ET.Element, gid: str) -> ET.Element:
    (found,) = [g for g in root.iter(f"{SVG}g") if g.attrib.get("id") == gid]
    return found


def _path_points(group: ET.Element) -> list[tuple[float, float]]:
    (path,) = group.iter(f"{SVG}path")
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", path.attrib["d"])]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def test_bars_are_proportional_and_hostile_labels_are_text(tmp_path: Path) -> None:
    hostile = "</text><script>alert(1)</script>&$x^2$"
    path = tmp_path / "top.svg"
    plot_top_ops(
        path, ["aten.linear", hostile, "aten.add"], [4.0, 2.0, 1.0], [True, False, True], "ms"
    )
    root = _parse(path)
    assert not list(root.iter(f"{SVG}script"))
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert hostile in texts and "p50 (ms)" in texts  # mathtext off: '$x^2$' stays as written
    widths, tops = [], []
    for index in range(3):
        xs, ys = zip(*_path_points(_group(root, f"bar_{index}")), strict=True)
        widths.append(max(xs) - min(xs))
        tops.append(min(ys))
    assert widths[0] / widths[1] == pytest.approx(2.0, rel=0.01)
    assert widths[1] / widths[2] == pytest.approx(2.0, rel=0.01)
    assert tops[0] < tops[1] < tops[2]  # the slowest on top
    fills = [_group(root, f"bar_{i}").find(f"{SVG}path").attrib["style"] for i in range(3)]  # type: ignore[union-attr]
    assert ["#3b7dd8" in fills[0], "#e08a2c" in fills[1], "#3b7dd8" in fills[2]] == [True] * 3


def test_gap_lines_clip_infinities_and_mark_threshold_and_divergence(tmp_path: Path) -> None:
    path = tmp_path / "gap.svg"
    plot_gap(path, [math.inf, 40.0, 10.0], [math.inf, 45.0, math.nan], 26.0, "snr", 2)
    root = _parse(path)
    accumulated = [y for _, y in _path_points(_group(root, "accumulated"))]
    local = [y for _, y in _path_points(_group(root, "local"))]
    assert accumulated[0] < accumulated[1] < accumulated[2]  # +inf at the top edge (SVG y down)
    assert local[2] > accumulated[2]  # nan drawn at the bottom edge, below 10 dB
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "threshold 26" in texts and "first divergence" in texts


def test_scatter_skips_non_finite_points_and_keeps_labels_inside(tmp_path: Path) -> None:
    path = tmp_path / "points.svg"
    points = [
        Point(1.0, 2.0, "vit/xnnpack"),
        Point(math.nan, 1.0, "bad"),
        Point(3.0, 5.0, "mlp/qnn"),
    ]
    plot_points(path, points, "t", ("x", "y"))
    root = _parse(path)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "vit/xnnpack" in texts and "mlp/qnn" in texts and "bad" not in texts
    # The rightmost point's label runs leftwards, so it stays inside the picture.
    left, right = (_group(root, f"point_{i}").find(f"{SVG}text") for i in (0, 1))
    assert "text-anchor: start" in left.attrib["style"]  # type: ignore[union-attr]
    assert "text-anchor: end" in right.attrib["style"]  # type: ignore[union-attr]


def test_the_same_data_draws_the_same_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    for path in (first, second):
        plot_gap(path, [1.0, 2.0], [0.5, 0.7], 1.5, "mse", None)
    assert first.read_bytes() == second.read_bytes()


def test_matplotlib_is_imported_only_when_a_plot_is_drawn() -> None:
    code = (
        "import sys, stages.analyze.report.plots, stages.analyze.stage; "
        "print('matplotlib' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_top_ops_legend_names_only_kinds_that_have_bars(tmp_path: Path) -> None:
    delegated_only = tmp_path / "delegated.svg"
    plot_top_ops(delegated_only, ["linear", "relu"], [2.0, 1.0], [True, True], "ms")
    mixed = tmp_path / "mixed.svg"
    plot_top_ops(mixed, ["linear", "relu"], [2.0, 1.0], [True, False], "ms")
    assert "inside a delegate" in delegated_only.read_text()
    assert "operator" not in delegated_only.read_text()
    assert "operator" in mixed.read_text()


def test_an_all_exact_run_has_nothing_to_plot() -> None:
    assert not has_inexact([math.inf, math.inf], higher_is_better=True)  # SNR: exact is inf
    assert has_inexact([math.inf, 61.0], higher_is_better=True)
    assert not has_inexact([0.0, 0.0], higher_is_better=False)  # errors: exact is 0
    assert has_inexact([0.0, 1e-7], higher_is_better=False)


def test_near_points_share_one_label_far_points_keep_theirs() -> None:
    points = [
        Point(1.00, 300.0, "vit/xnnpack-fp32"),
        Point(1.02, 300.0, "vit/qnn-fp32"),
        Point(5.00, 40.0, "vit/qnn-int8"),
    ]
    merged = merge_close_labels(points)
    assert [p.label for p in merged] == ["vit/xnnpack-fp32; vit/qnn-fp32", "", "vit/qnn-int8"]
    assert [(p.x, p.y) for p in merged] == [(p.x, p.y) for p in points]
