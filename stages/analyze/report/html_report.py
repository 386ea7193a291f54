"""report.html: one self-contained page (inline CSS, SVG plots as data URIs) — summary, tables, plots."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from stages.analyze.report.accuracy_lines import accuracy_headline, accuracy_output_lines
from stages.analyze.report.instrumentation_line import instrumentation_line
from stages.analyze.report.terminal_report import identity_note
from stages.safe_io.atomic_write import write_text_atomic

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
.scroll{overflow-x:auto;max-width:100%} td{overflow-wrap:anywhere;max-width:48em}
details>summary{cursor:pointer;font-weight:bold;margin:.6em 0}
.divergence th{white-space:nowrap;width:14em} .clean{color:#2ca25f;font-weight:bold}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:1.6em}
.identity{background:#fff4d6;border-left:4px solid #e0a800;padding:.4em .8em}
.verdict{display:inline-block;padding:.2em .8em;border-radius:4px;color:#fff;font-weight:bold}
.pass{background:#2ca25f}.fail{background:#d62728}.not_evaluated{background:#888}
.map_errors{background:#e6550d}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3} img{max-width:100%;border:1px solid #eee}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em} dt{font-weight:bold}
"""
# Marks the page once every plot has decoded, so a headless browser test can check rendering.
_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.from(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-images-loaded', ok + '/' + imgs.length);
});
"""


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _table(records: list[dict[str, Any]], columns: list[str], limit: int | None = None) -> str:
    shown = records[:limit] if limit else records
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in shown:
        cells = []
        for c in columns:
            v = r.get(c, "")
            if isinstance(v, float):
                v = f"{v:.4g}"
            elif isinstance(v, list | dict | tuple):
                v = json.dumps(v)
            cells.append(f"<td>{html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = (
        f"<p>{len(records) - len(shown)} more rows in the CSV.</p>"
        if limit and len(records) > limit
        else ""
    )
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div>{more}"


def _image(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/svg+xml;base64,{data}">'


def _facts(summary: dict[str, Any]) -> dict[str, Any]:
    """The headline facts, each number with its unit or metric beside it."""
    metric = summary.get("gap_metric")
    return {
        "model": summary.get("model"),
        "backend": f"{summary.get('backend')} ({summary.get('precision')})",
        "latency p50 / p90": f"{_fmt(summary.get('latency_p50_ms'))} / "
        f"{_fmt(summary.get('latency_p90_ms'))} ms",
        "event times in": summary.get("time_unit"),
        "delegated time share": _fmt(summary.get("delegated_time_share")),
        "partitions": summary.get("partitions"),
        "delegated-op ratio": _fmt(summary.get("delegated_op_ratio")),
        "gap metric": f"{metric} (threshold {summary.get('threshold')})",
        "verdict rule": _rule(summary),
        "worst gap": worst_gap_text(summary),
        "ETDump": summary.get("etdump"),
        "ETRecord": summary.get("etrecord"),
        "program identity": (summary.get("program_identity") or {}).get("status"),
        **_recovery_fact(summary.get("xnnpack_recovery")),
        **(
            {"instrumentation": line}
            if (line := instrumentation_line(summary.get("instrumentation")))
            else {}
        ),
    }


def _rule(summary: dict[str, Any]) -> str:
    """How the verdict judged float outputs (analyze.verdict_rule)."""
    if summary.get("verdict_rule") == "expected":
        return (
            f"each op's observed local error vs what {summary.get('precision')} alone should cost "
            f"there; fails {summary.get('margin_db')} dB over"
        )
    return f"{summary.get('gap_metric')} threshold {summary.get('threshold')}"


def _recovery_fact(recovery: dict[str, Any] | None) -> dict[str, str]:
    """How many XNNPACK kernels were linked by recovery (never the delegate's own map)."""
    if not recovery:
        return {}
    reasons = "; ".join(f"{n}: {why}" for why, n in recovery.get("unlinked_reasons", {}).items())
    text = (
        f"{recovery.get('linked')} of {recovery.get('kernels')} linked to ops, recovered from the "
        f"serialized XNNPACK graph ({recovery.get('graph_source')}), not the delegate's own map"
    )
    return {"XNNPACK kernel links": text + (f"; unlinked: {reasons}" if reasons else "")}


def worst_gap_text(summary: dict[str, Any]) -> str:
    """The worst compared value named for its metric: the lowest SNR, the highest error."""
    metric = summary.get("gap_metric")
    compared = summary.get("compared_outputs") or 0
    if not summary.get("largest_gaps"):
        return f"none: all {compared} float outputs are exact" if compared else "nothing compared"
    side = "lowest" if summary.get("higher_is_better") else "highest"
    return f"{_fmt(summary.get('max_gap'))} ({side} {metric} of {compared} float outputs)"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | dict | tuple):
        return json.dumps(value)
    return str(value)


# With an error budget the op is judged on its observed SNR (dB): the comparator's own SNR of the
# same output would be a second figure for one question, so the card leaves it out.
_SECOND_FIGURES = ("local_gap", "accumulated_gap")


def card_fields(first: dict[str, Any]) -> dict[str, Any]:
    """The first divergence's fields the card shows: one gap figure per question, no blanks."""
    budget = first.get("excess_db") is not None
    return {
        k: v
        for k, v in first.items()
        if v not in ("", None) and not (budget and k in _SECOND_FIGURES)
    }


def divergence_block(summary: dict[str, Any]) -> str:
    """The first divergence as field/value rows (it fits any width), or why there is none."""
    first = summary.get("first_divergence")
    if not first:
        if summary.get("verdict") == "pass":
            text = worst_gap_text(summary).removeprefix("none: ")
            return f"<p class='clean'>No divergence: {html.escape(text)}.</p>"
        return ""
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(_cell(v))}</td></tr>"
        for k, v in card_fields(first).items()
    )
    return (
        "<h2>First divergence</h2>"
        f"<div class='scroll'><table class='divergence'>{rows}</table></div>"
    )


def accuracy_block(record: dict[str, Any] | None) -> str:
    """The end-to-end accuracy against its budget, beside the verdict."""
    headline = accuracy_headline(record)
    if not headline:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in accuracy_output_lines(record))
    return f"<p class='accuracy'>{html.escape(headline)}</p><ul>{items}</ul>"


def _head(summary: dict[str, Any]) -> list[str]:
    """Title, verdict and first divergence (what a reader came for), then notes and facts."""
    verdict = str(summary.get("verdict", "not_evaluated"))
    note = identity_note(summary.get("program_identity"))
    facts = _facts(summary)
    return [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width'>",
        f"<title>Delegate debugger report: {html.escape(str(summary.get('model')))}</title>",
        f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>",
        f"<h1>{html.escape(str(summary.get('model')))} on {html.escape(str(summary.get('backend')))}</h1>",
        f"<p>Verdict: <span class='verdict {html.escape(verdict)}'>{html.escape(verdict)}</span> "
        f"{html.escape(str(summary.get('verdict_reason', '')))}</p>",
        accuracy_block(summary.get("accuracy")),
        divergence_block(summary),
        f"<p class='identity'>{html.escape(note)}</p>" if note else "",
        *(
            f"<p class='identity'>warning: {html.escape(str(w))}</p>"
            for w in summary.get("warnings", [])
        ),
        "<h2>Facts</h2><dl>"
        + "".join(
            f"<dt>{html.escape(k)}</dt><dd>{html.escape(str(v))}</dd>" for k, v in facts.items()
        )
        + "</dl>",
    ]


def collapsed(title: str, body: str, rows: int) -> str:
    """A long table folded under its title and row count (open it to read)."""
    return f"<details><summary>{html.escape(title)}: {rows} rows</summary>{body}</details>"


MAP_CHECK_COLUMNS = ["severity", "kind", "partition_id", "identifiers", "debug_handles", "message"]


def map_check_section(summary: dict[str, Any]) -> str:
    """The delegate map findings (docs/delegate_map_check.md); nothing when there are none."""
    findings = summary.get("delegate_map_check") or []
    if not findings:
        return ""
    return "<h2>Delegate debug-handle map check</h2>" + _table(findings, MAP_CHECK_COLUMNS)


EVENT_COLUMNS = [
    "event_block_name",
    "event_name",
    "p50",
    "p90",
    "min",
    "max",
    "op_names",
    "delegate_debug_identifier",
    "debug_handles",
    "is_delegated_op",
    "delegate_backend_name",
    "link_source",
]


GENERATION_STEP_COLUMNS = [
    "step",
    "kind",
    "latency_ms",
    "token",
    "reference_token",
    "top1_agree",
    "logits_snr_db",
    "status",
    "diverged_outputs",
]


def generation_section(summary: dict[str, Any]) -> str:
    """A generation's steps: the first divergence as (step, layer, op), token agreement,
    latencies, one row per step and the KV cache's SNR per layer (folded); none for a plain run."""
    generation = summary.get("generation")
    if not isinstance(generation, dict):
        return ""
    first, token = generation.get("first_divergence"), generation.get("first_differing_token")
    latency = generation.get("latency") or {}
    facts = {
        "first divergence": (
            f"step {first['step']} ({first['kind']}), {first['layer']}, "
            f"{'+'.join(first['op_names'])} at {first['source_line']}"
            if first
            else "none"
        ),
        "first differing token": (
            f"step {token['step']}: {token['runtime_token']} (reference {token['reference_token']})"
            if token
            else "none"
        ),
        "top-1 agreement": generation.get("top1_agreement"),
        **{key.replace("_", " "): value for key, value in latency.items()},
    }
    rows = [{"fact": key, "value": value} for key, value in facts.items()]
    steps = generation.get("steps") or []
    kv = generation.get("kv_cache") or []
    kv_table = _table(kv, ["step", "layer", "k_snr_db", "v_snr_db"]) if kv else ""
    return (
        "<h2>Generation (prefill and decode steps)</h2>"
        + _table(rows, ["fact", "value"])
        + _table(steps, GENERATION_STEP_COLUMNS)
        + (collapsed("KV cache SNR per layer and step", kv_table, len(kv)) if kv else "")
    )


def render_report(
    summary: dict[str, Any],
    events: list[dict[str, Any]],
    gaps: list[dict[str, Any]],
    plots: list[Path],
    graph_view: str = "",
) -> str:
    parts = _head(summary)
    parts.append(map_check_section(summary))  # the first divergence is in _head
    parts.append(generation_section(summary))
    flows = summary.get("control_flow") or []
    if flows:  # the branch each side took at every torch.cond, per sample
        parts.append("<h2>Control flow</h2>")
        parts.append(_table(flows, list(flows[0])))
    for plot in plots:
        parts.append(
            f"<h2>{html.escape(plot.stem.replace('_', ' '))}</h2>{_image(plot, plot.stem)}"
        )
    parts.append(graph_view)  # graph_view.render_graph_view: partitions and ops in graph order
    unit = html.escape(str(summary.get("time_unit", "")))
    slowest = summary.get("slowest_ops") or []
    if slowest:
        parts.append(f"<h2>Slowest ops (p50 in {unit})</h2>")
        columns = ["event_name", "op_names", "p50", "delegate_backend_name"]
        parts.append(_table(slowest, [*columns, "delegate_debug_identifier", "link_source"]))
    largest = summary.get("largest_gaps") or []
    if largest:
        parts.append("<h2>Largest gaps</h2>")
        parts.append(_table(largest, list(largest[0])))
    if gaps:
        columns = list(dict.fromkeys(key for g in gaps for key in g))  # float and exact rows
        parts.append(collapsed("Numeric gap", _table(gaps, columns, limit=400), len(gaps)))
    several = len(summary.get("methods") or []) > 1  # a program with several methods
    if events:
        parts.append(
            collapsed(
                f"Events (times in {unit})",
                _table(events, ["method", *EVENT_COLUMNS] if several else EVENT_COLUMNS, limit=400),
                len(events),
            )
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path: Path, text: str) -> None:
    write_text_atomic(path, text)
