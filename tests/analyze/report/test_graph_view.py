"""The report's graph view: delegate calls in graph order, coloured, collapsing for large graphs."""

from __future__ import annotations

import json
import re

from stages.analyze.report.graph_view import LARGE_GRAPH_OPS, render_graph_view
from stages.analyze.report.node_facts import DELEGATED, GapScale, NodeFacts, Placement
from tests.helpers.analyze_runs import RunTiny

SNR = GapScale("snr", 60.0, True)


def test_report_shows_each_delegate_call_and_its_ops(run_tiny: RunTiny) -> None:
    run_dir = run_tiny("fault-vit-xnnpack", "vit", "backend=xnnpack", "backend.fault.node=linear_1")
    page = (run_dir / "report.html").read_text()
    assert re.search(r"https?://", page) is None  # readable without a server or network
    assert f"python -m pipeline.tools.explore {run_dir}" in page
    lowering = json.loads((run_dir / "lowering.json").read_text())
    for partition in lowering["partitions"]:
        row = re.search(
            rf"<tr><td>xnnpack partition {partition['partition_id']}</td><td>(\d+)</td>.*?</tr>",
            page,
        )
        assert row is not None and int(row.group(1)) == len(partition["ops"])
        covered = re.split(r" · |\+", re.sub(r"<.*?>", "|", row.group(0)).split("|")[-3])
        assert covered == partition["ops"]  # graph order, fused kernels joined by '+'
    first = re.findall(r'<span class="op first"[^>]*>([^<]+)</span>', page)
    assert "linear_1" in first
    assert "FIRST DIVERGENCE" in page


def _nodes(count: int, first_at: int) -> list[NodeFacts]:
    nodes = []
    for i in range(count):
        node = NodeFacts(
            f"op_{i}",
            i + 1,
            "aten.linear.default",
            f"blocks.{i // 20}.mlp",
            Placement(DELEGATED, "xnnpack", i // 20, i),
            latency=0.01 * (i % 7 + 1),
            local_gap=300.0 if i != first_at else 5.0,
            diverged=i == first_at,
            first_divergence=i == first_at,
            gap_statuses=["ok"],
        )
        nodes.append(node)
    return nodes


def test_large_graphs_collapse_by_module_except_the_first_divergence() -> None:
    large = render_graph_view(_nodes(LARGE_GRAPH_OPS + 50, first_at=45), SNR, "ms", "cmd")
    groups = re.findall(r"<details( open)?><summary><b>([^<]+)</b>", large)
    assert [name for _, name in groups] == [f"blocks.{i}" for i in range(10)]
    assert [name for is_open, name in groups if is_open] == ["blocks.2"]
    assert "modules start collapsed" in large
    small = render_graph_view(_nodes(40, first_at=3), SNR, "ms", "cmd")
    assert re.findall(r"<details( open)?>", small) == [" open", " open"]


def test_colours_follow_time_share_and_gap() -> None:
    nodes = _nodes(3, first_at=1)
    nodes[2].diverged = True
    page = render_graph_view(nodes, SNR, "ms", "cmd")
    chips = re.findall(
        r'<span class="op[^"]*" style="background:(#\w+);[^"]*?border-bottom-color:(#\w+)"', page
    )
    backgrounds = [b for b, _ in chips]
    assert backgrounds[2] != backgrounds[0]  # op_2 has 3x op_0's time: a darker fill
    assert [g for _, g in chips] == ["#2ca25f", "#c51b8a", "#d62728"]
    assert render_graph_view([], SNR, "ms", "cmd") == ""
