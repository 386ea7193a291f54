"""What the plots draw: no legend entry for what is not drawn, no plot of nothing, labels apart."""

from __future__ import annotations

import math
from pathlib import Path

from stages.analyze.report.plots import has_inexact, merge_close_labels, plot_top_ops
from stages.analyze.report.svg_charts import Point


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
