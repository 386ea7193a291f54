"""The analyze stage: load → link → compare → report, each a pure step over loaded data."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.analyze.comparators import build_comparators
from stages.analyze.config import AnalyzeConfig
from stages.analyze.event_table import (
    EVENT_COLUMNS,
    EventRow,
    build_event_rows,
    event_record,
    write_csv,
)
from stages.analyze.html_report import render_report, write_report
from stages.analyze.linking import (
    DELEGATE_CALL,
    ProgramIndex,
    check_same_program,
    ops_of,
    source_line,
)
from stages.analyze.loading import load_inputs
from stages.analyze.metadata_parsers import resolve_parser
from stages.analyze.numeric_gap import GapRow, compute_numeric_gap, runtime_outputs
from stages.analyze.plots import plot_gap, plot_top_ops
from stages.analyze.trace_export import build_trace, write_trace
from stages.analyze.verdict import (
    FAIL,
    Verdict,
    decide,
    finite,
    metric_comparator,
    row_diverged,
    threshold_for,
)
from stages.formats.artifacts import ArtifactName
from stages.formats.etrecord import ETRecord

METHOD_EVENT = "Method::execute"
LOAD_BLOCK = "Default"  # method load/init: not an op
SUMMARY_FORMAT = "delegate-debugger-summary"
SUMMARY_VERSION = 1
TOP_OPS_PNG = "top_ops_p50.png"
# MLflow metrics must be finite: an exact match (SNR = inf dB) is logged as this many dB.
SNR_METRIC_CAP_DB = 300.0
GAP_PNG = "numeric_gap.png"


@dataclass(frozen=True)
class AnalyzeArtifacts:
    """Files the analyze stage wrote, plus its headline metrics."""

    events: Path
    numeric_gap: Path
    summary: Path
    trace: Path
    report: Path
    plots: tuple[Path, ...]
    metrics: dict[str, float] = field(default_factory=dict)


def _gap_record(
    row: GapRow, index: ProgramIndex, metric: str, threshold: float | None, diverged: bool
) -> dict[str, Any]:
    ops = ops_of(index, row.handles)
    traces = ops["stack_traces"]
    record: dict[str, Any] = {
        "group": row.group,
        "output_index": row.output_index,
        "op_names": ops["op_names"],
        "op_types": ops["op_types"],
        "debug_handles": list(row.handles),
        "delegate_debug_identifiers": row.identifiers,
        "delegate_backend_name": row.backend,
        "is_delegated_op": row.is_delegated,
        "status": row.status,
        "runtime_shape": list(row.runtime_shape) if row.runtime_shape else None,
        "reference_shape": list(row.reference_shape) if row.reference_shape else None,
        "runtime_dtype": row.runtime_dtype,
        "samples": row.samples,
    }
    for name, value in row.accumulated.items():
        record[name] = value
    for name, value in row.local.items():
        record[f"local_{name}"] = value
    record["gap_metric"] = metric
    record["threshold"] = threshold
    record["diverged"] = diverged
    record["source_line"] = source_line(traces[-1]) if traces else ""
    record["module_hierarchy"] = ops["module_hierarchy"][-1] if ops["module_hierarchy"] else ""
    return record


def _divergence(verdict: Verdict, index: ProgramIndex) -> dict[str, Any] | None:
    row = verdict.first_divergence
    if row is None:
        return None
    ops = ops_of(index, row.handles)
    traces = ops["stack_traces"]
    return {
        "group": row.group,
        "op_names": ops["op_names"],
        "op_types": ops["op_types"],
        "debug_handles": list(row.handles),
        "delegate_debug_identifiers": row.identifiers,
        "delegate_backend_name": row.backend,
        "status": row.status,
        "local_gap": finite(row.local.get(verdict.metric, math.nan)) if row.local else None,
        "accumulated_gap": finite(row.accumulated.get(verdict.metric, math.nan))
        if row.accumulated
        else None,
        "source_line": source_line(traces[-1]) if traces else "",
        "module_hierarchy": ops["module_hierarchy"][-1] if ops["module_hierarchy"] else "",
    }


def _latency(rows: list[EventRow]) -> tuple[float | None, float | None, float | None]:
    """p50/p90 of Method::execute and the delegated share of it, from timed blocks."""
    method = [r for r in rows if r.event_name == METHOD_EVENT and r.durations]
    if not method:
        return None, None, None
    main = max(method, key=lambda r: len(r.durations))
    p50, p90 = main.stat("p50"), main.stat("p90")
    delegate = sum(
        r.stat("p50")
        for r in rows
        if r.event_name == DELEGATE_CALL and r.event_block_name == main.event_block_name
    )
    return p50, p90, (delegate / p50 if p50 > 0 else None)


def _clean(record: dict[str, Any]) -> dict[str, Any]:
    return {k: finite(v) for k, v in record.items()}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False))
    os.replace(tmp, path)


def _gap_plot_series(records: list[dict[str, Any]], metric: str) -> tuple[list[float], list[float]]:
    acc = [float(r.get(metric, math.nan)) for r in records if r["status"] == "ok" and metric in r]
    loc = [
        float(r.get(f"local_{metric}", r.get(metric, math.nan)))
        for r in records
        if r["status"] == "ok" and metric in r
    ]
    return acc, loc


def run_analyze(
    cfg: AnalyzeConfig,
    etdump: Path,
    debug_buffer: Path | None,
    etrecord: Path | None,
    run_dir: Path,
) -> AnalyzeArtifacts:
    """Write events.csv, numeric_gap.csv, summary.json, trace.json, plots and report.html."""
    started = time.perf_counter()
    comparators = build_comparators(list(cfg.comparators), cfg.custom_comparator)
    gap_comparator = metric_comparator(comparators, cfg.gap_metric)
    inputs = load_inputs(etdump, debug_buffer, etrecord)
    record: ETRecord | None = inputs.etrecord
    index = ProgramIndex.from_etrecord(record) if record is not None else ProgramIndex.empty()
    check_same_program(inputs.etdump, index, str(etdump), str(etrecord))
    threshold = threshold_for(dict(cfg.thresholds), index.precision)
    parser = resolve_parser(
        cfg.delegate_metadata_parser,
        index.backend,
        (record.lowering_info.get("backend_target") if record is not None else None),
    )

    # Link: events and their stats.
    event_rows = build_event_rows(inputs.etdump, index, parser, cfg.time_unit)
    events = [event_record(r, cfg.time_unit) for r in event_rows]
    link_seconds = time.perf_counter() - started

    # Compare: numeric gap against the exported program.
    gap_started = time.perf_counter()
    gap_rows: list[GapRow] = []
    reason = ""
    outputs = (
        runtime_outputs(inputs.etdump, inputs.debug_buffer, index, str(debug_buffer))
        if record is not None and inputs.debug_buffer is not None
        else []
    )
    if record is None:
        reason = "no ETRecord: events and timings only"
    elif inputs.debug_buffer is None:
        reason = "no debug buffer: pass analyze.debug_buffer=PATH for numeric gaps"
    elif not outputs:
        reason = (
            "the ETDump holds no intermediate outputs (runtime.debug_level=intermediate_outputs)"
        )
    else:
        _, gap_rows = compute_numeric_gap(
            outputs, record.exported_program(), record.representative_inputs, comparators
        )
    verdict = decide(gap_rows, gap_comparator, threshold, bool(gap_rows), reason)
    gap_seconds = time.perf_counter() - gap_started

    # Report.
    gaps = [
        _gap_record(
            r,
            index,
            verdict.metric,
            threshold,
            row_diverged(r, verdict.metric, threshold, verdict.higher_is_better),
        )
        for r in gap_rows
    ]
    events_path = run_dir / ArtifactName.EVENTS_CSV
    gap_path = run_dir / ArtifactName.NUMERIC_GAP_CSV
    write_csv(events_path, EVENT_COLUMNS, events)
    gap_columns = tuple(gaps[0]) if gaps else ("group", "status")
    write_csv(gap_path, gap_columns, gaps)

    p50, p90, share = _latency(event_rows)
    op_events = [
        e
        for e in events
        if e["event_name"] not in (METHOD_EVENT, DELEGATE_CALL)
        and e["event_block_name"] != LOAD_BLOCK
        and (e["debug_handles"] or e["is_delegated_op"] or e["instruction_id"] >= 0)
    ]
    slowest = sorted(op_events, key=lambda e: -e["p50"])[: cfg.top_k]
    metric = verdict.metric
    compared = [g for g in gaps if metric in g]
    worst_key = (lambda g: g[metric]) if verdict.higher_is_better else (lambda g: -g[metric])
    largest = sorted(compared, key=worst_key)[: cfg.top_k]
    worst = largest[0][metric] if largest else None
    first = _divergence(verdict, index)
    delegated_handles = {h for m in index.maps for h in m.delegated_handles}
    summary: dict[str, Any] = {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "model": record.model_name if record is not None else "",
        "backend": index.backend or "unknown",
        "precision": index.precision,
        "etdump": str(etdump),
        "etrecord": str(etrecord) if etrecord is not None else None,
        "debug_buffer": str(debug_buffer) if debug_buffer is not None else None,
        "verdict": verdict.status,
        "verdict_reason": verdict.reason
        or (
            f"{verdict.diverged_rows} output(s) cross the threshold"
            if verdict.status == FAIL
            else ""
        ),
        "gap_metric": metric,
        "higher_is_better": verdict.higher_is_better,
        "threshold": threshold,
        "first_divergence": first,
        "latency_p50_ms": p50,
        "latency_p90_ms": p90,
        "delegated_time_share": share,
        "partitions": len(index.maps),
        "delegated_op_ratio": (len(delegated_handles) / len(index.handles))
        if index.handles
        else None,
        "max_gap": finite(worst) if worst is not None else None,
        "time_unit": cfg.time_unit,
        "slowest_ops": [
            _clean(
                {
                    k: e[k]
                    for k in (
                        "event_name",
                        "op_names",
                        "p50",
                        "delegate_backend_name",
                        "delegate_debug_identifier",
                        "debug_handles",
                    )
                }
            )
            for e in slowest
        ],
        "largest_gaps": [
            _clean(
                {
                    k: g.get(k)
                    for k in (
                        "group",
                        "op_names",
                        metric,
                        f"local_{metric}",
                        "delegate_debug_identifiers",
                        "source_line",
                    )
                }
            )
            for g in largest
        ],
        "events": len(events),
        "compared_outputs": len(compared),
        "artifacts": {},
        "seconds": {"link": link_seconds, "numeric_gap": gap_seconds},
    }

    plots: list[Path] = []
    if slowest:
        path = run_dir / TOP_OPS_PNG
        plot_top_ops(
            path,
            ["+".join(e["op_names"]) or e["event_name"] for e in slowest],
            [e["p50"] for e in slowest],
            [bool(e["is_delegated_op"]) for e in slowest],
            cfg.time_unit,
        )
        plots.append(path)
    if compared:
        acc, loc = _gap_plot_series(gaps, metric)
        first_x = None
        if first is not None:
            ordered = [g for g in gaps if g["status"] == "ok" and metric in g]
            first_x = next((i for i, g in enumerate(ordered) if g["group"] == first["group"]), None)
        path = run_dir / GAP_PNG
        plot_gap(path, acc, loc, threshold, metric, first_x)
        plots.append(path)

    trace_gaps = {
        tuple(g["debug_handles"]): _clean(
            {
                f"gap_{metric}": g.get(metric),
                f"local_gap_{metric}": g.get(f"local_{metric}"),
                "diverged": g["diverged"],
            }
        )
        for g in gaps
    }
    trace_path = run_dir / ArtifactName.TRACE_JSON
    write_trace(trace_path, build_trace(inputs.etdump, index, trace_gaps))

    summary_path = run_dir / ArtifactName.SUMMARY_JSON
    report_path = run_dir / ArtifactName.REPORT_HTML
    summary["artifacts"] = {
        "events": str(events_path),
        "numeric_gap": str(gap_path),
        "trace": str(trace_path),
        "report": str(report_path),
        "plots": [str(p) for p in plots],
    }
    summary["seconds"]["total"] = time.perf_counter() - started
    summary = _clean(summary)
    _write_json(summary_path, summary)
    write_report(
        report_path,
        render_report(summary, [_clean(e) for e in events], [_clean(g) for g in gaps], plots),
    )

    metrics: dict[str, float] = {
        "events": float(len(events)),
        "compared_outputs": float(len(compared)),
        "verdict_pass": 1.0 if verdict.status == "pass" else 0.0,
        "diverged_outputs": float(verdict.diverged_rows),
        "partitions": float(len(index.maps)),
        "numeric_gap_seconds": gap_seconds,
    }
    optional = {
        "latency_p50_ms": p50,
        "latency_p90_ms": p90,
        "delegated_time_share": share,
        "delegated_op_ratio": summary["delegated_op_ratio"],
        "max_gap": worst,
        "first_divergence_gap": (first or {}).get("local_gap"),
    }
    for key, value in optional.items():
        if isinstance(value, str):  # 'inf' / '-inf' from finite()
            value = float(value)
        if isinstance(value, int | float) and not math.isnan(value):
            cap = SNR_METRIC_CAP_DB if metric == "snr" and key.endswith("gap") else 1e300
            metrics[key] = max(-cap, min(cap, float(value)))
    return AnalyzeArtifacts(
        events=events_path,
        numeric_gap=gap_path,
        summary=summary_path,
        trace=trace_path,
        report=report_path,
        plots=tuple(plots),
        metrics=metrics,
    )
