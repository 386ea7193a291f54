"""The report's graph view: delegate calls and the ops they cover, in graph order (HTML/CSS only).

Each op is a chip coloured by its share of the op time (fill) and by its local gap (underline);
fused kernels are bracketed, delegate calls boxed. Ops are grouped by module; large graphs start
collapsed so the page stays readable. No script, no external URL: the page works from a file.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from stages.analyze.report.node_facts import DELEGATED, GapScale, NodeFacts

LARGE_GRAPH_OPS = 150  # above this many ops, module groups start collapsed
MODULE_DEPTH = 2  # 'blocks.3.attn.qkv' groups under 'blocks.3'
_OK, _DIVERGED, _FIRST, _UNCOMPARED = "#2ca25f", "#d62728", "#c51b8a", "#bbbbbb"

GRAPH_VIEW_CSS = """
.gv-legend span{display:inline-block;padding:0 .4em;margin-right:.6em;border-radius:3px}
.gv details{margin:.2em 0;border-left:3px solid #ddd;padding-left:.5em}
.gv summary{cursor:pointer;font-size:.9em}
.gv .strip{display:inline-flex;height:.8em;vertical-align:middle;margin-left:.5em}
.gv .strip i{display:inline-block;width:4px;height:100%}
.gv .call{display:inline-block;border:1px solid #4a7fb0;border-radius:4px;padding:.1em .2em;
margin:.15em .1em;background:#f4f8fc}
.gv .call>b{font-size:.7em;color:#4a7fb0;display:block}
.gv .kernel{display:inline-block;border:1px dashed #888;border-radius:3px;padding:0 .1em;margin:0 .1em}
.gv .op{display:inline-block;font:.75em monospace;padding:.1em .3em;margin:.1em;border-radius:2px;
border-bottom:4px solid #bbb}
.gv .op.first{outline:2px solid #c51b8a}
"""


@dataclass(frozen=True)
class ViewScale:
    """What the colours are relative to: the largest op time and the gap threshold."""

    max_latency: float
    total_latency: float
    gap: GapScale | None
    unit: str


def _heat(fraction: float) -> str:
    """White (0) to dark red (1) as a CSS colour."""
    f = max(0.0, min(1.0, fraction))
    r, g, b = (255 - int(76 * f), 255 - int(255 * f), 255 - int(255 * f))
    return f"#{r:02x}{g:02x}{b:02x}"


def _gap_color(node: NodeFacts) -> str:
    if node.first_divergence:
        return _FIRST
    if not node.gap_statuses:
        return _UNCOMPARED
    return _DIVERGED if node.diverged else _OK


def _tooltip(node: NodeFacts, scale: ViewScale) -> str:
    parts = [f"{node.name} ({node.op_type})", node.placement.label()]
    if node.latency is not None:
        share = node.latency / scale.total_latency if scale.total_latency else 0.0
        split = f", split over {node.latency_shared_by} ops" if node.latency_shared_by > 1 else ""
        parts.append(f"p50 {node.latency:.4g} {scale.unit} ({share:.1%} of op time{split})")
    if node.local_gap is not None and scale.gap is not None:
        parts.append(f"local {scale.gap.metric} {node.local_gap:.4g}")
    if node.first_divergence:
        parts.append("FIRST DIVERGENCE")
    return " | ".join(parts)


def _chip(node: NodeFacts, scale: ViewScale) -> str:
    fill = _heat((node.latency or 0.0) / scale.max_latency) if scale.max_latency else "#ffffff"
    text = "#ffffff" if node.latency and node.latency > 0.6 * scale.max_latency else "#000000"
    cls = "op first" if node.first_divergence else "op"
    return (
        f'<span class="{cls}" style="background:{fill};color:{text};'
        f'border-bottom-color:{_gap_color(node)}" title="{html.escape(_tooltip(node, scale))}">'
        f"{html.escape(node.name)}</span>"
    )


def _call_key(node: NodeFacts) -> tuple[str, int | None]:
    place = node.placement
    return (place.backend, place.partition_id) if place.kind == DELEGATED else ("", None)


def _ops_html(nodes: Sequence[NodeFacts], scale: ViewScale) -> str:
    """Chips in graph order; runs of one delegate call boxed, fused kernels bracketed."""
    out: list[str] = []
    for (backend, partition), run in groupby(nodes, key=_call_key):
        run_nodes = list(run)
        if partition is None:
            out.extend(_chip(n, scale) for n in run_nodes)
            continue
        kernels = []
        for _, kernel in groupby(run_nodes, key=lambda n: n.placement.kernel):
            chips = [_chip(n, scale) for n in kernel]
            kernels.append(
                f'<span class="kernel">{"".join(chips)}</span>' if len(chips) > 1 else chips[0]
            )
        label = html.escape(f"{backend} partition {partition}")
        out.append(f'<span class="call"><b>{label}</b>{"".join(kernels)}</span>')
    return "".join(out)


def _module_key(node: NodeFacts) -> str:
    return ".".join(node.module.split(".")[:MODULE_DEPTH]) or "(top level)"


def _worst_gap(nodes: Sequence[NodeFacts], gap: GapScale | None) -> str:
    values = [n.local_gap for n in nodes if n.local_gap is not None]
    if not values or gap is None:
        return ""
    worst = min(values) if gap.higher_is_better else max(values)
    if worst == (math.inf if gap.higher_is_better else 0.0):
        return ", every output exact"
    side = "lowest" if gap.higher_is_better else "highest"
    return f", worst local gap: {side} {gap.metric} {worst:.4g}"


def _module_group(module: str, nodes: Sequence[NodeFacts], scale: ViewScale, open_: bool) -> str:
    time = sum(n.latency or 0.0 for n in nodes)
    share = time / scale.total_latency if scale.total_latency else 0.0
    strip = "".join(
        f'<i style="background:{_gap_color(n)}" title="{html.escape(n.name)}"></i>' for n in nodes
    )
    first = " — first divergence here" if any(n.first_divergence for n in nodes) else ""
    summary = (
        f"<b>{html.escape(module)}</b>: {len(nodes)} ops, {time:.4g} {scale.unit} "
        f"({share:.1%}){html.escape(_worst_gap(nodes, scale.gap))}{first}"
    )
    return (
        f"<details{' open' if open_ or first else ''}><summary>{summary}"
        f'<span class="strip">{strip}</span></summary>{_ops_html(nodes, scale)}</details>'
    )


def _partition_rows(nodes: Sequence[NodeFacts], scale: ViewScale) -> str:
    rows = []
    calls: dict[tuple[str, int | None], list[NodeFacts]] = {}
    for node in nodes:
        if node.placement.kind == DELEGATED:
            calls.setdefault(_call_key(node), []).append(node)
    for (backend, partition), members in calls.items():
        time = sum(n.latency or 0.0 for n in members)
        share = time / scale.total_latency if scale.total_latency else 0.0
        kernels = [
            "+".join(n.name for n in group)
            for _, group in groupby(members, key=lambda n: n.placement.kernel)
        ]
        rows.append(
            f"<tr><td>{html.escape(backend)} partition {partition}</td><td>{len(members)}</td>"
            f"<td>{time:.4g} ({share:.1%})</td>"
            f"<td>{html.escape(_worst_gap(members, scale.gap).lstrip(', '))}</td>"
            f"<td>{html.escape(' · '.join(kernels))}</td></tr>"
        )
    head = f"<tr><th>delegate call</th><th>ops</th><th>p50 ({html.escape(scale.unit)})</th><th>gap</th>"
    return f"<table>{head}<th>ops covered, in graph order (fused kernels joined by +)</th></tr>{''.join(rows)}</table>"


def render_graph_view(
    nodes: Sequence[NodeFacts], gap: GapScale | None, unit: str, explore_command: str
) -> str:
    """The report section (HTML fragment with its own CSS); empty without nodes."""
    if not nodes:
        return ""
    latencies = [n.latency for n in nodes if n.latency is not None]
    scale = ViewScale(max(latencies, default=0.0), sum(latencies), gap, unit)
    large = len(nodes) > LARGE_GRAPH_OPS
    groups = [
        _module_group(module, list(members), scale, open_=not large)
        for module, members in groupby(nodes, key=_module_key)
    ]
    legend = (
        '<p class="gv-legend">fill: share of op time (white → '
        f'<span style="background:{_heat(1.0)};color:#fff">slowest op</span>); underline: '
        f'<span style="border-bottom:4px solid {_OK}">within threshold</span>'
        f'<span style="border-bottom:4px solid {_DIVERGED}">diverged</span>'
        f'<span style="border-bottom:4px solid {_FIRST}">first divergence</span>'
        f'<span style="border-bottom:4px solid {_UNCOMPARED}">not compared</span>; '
        "boxes: delegate calls; dashed: fused kernels (their time split evenly over their ops)."
        + (f" {len(nodes)} ops: modules start collapsed." if large else "")
        + "</p>"
    )
    return (
        f"<h2>Graph view</h2><style>{GRAPH_VIEW_CSS}</style>"
        f"<p>Interactive graph with these numbers as overlays: <code>{html.escape(explore_command)}</code>"
        " (needs <code>pip install -e '.[explorer]'</code>).</p>"
        f"{_partition_rows(nodes, scale)}{legend}<div class='gv'>{''.join(groups)}</div>"
    )
