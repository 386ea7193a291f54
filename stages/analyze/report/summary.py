"""summary.json and the rows behind it: gap records, first divergence, latency, top lists."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.analyze.compare.exact_compare import EXACT_KEYS
from stages.analyze.compare.expected_error import EXCESS_DB
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.compare.gap.sample_stats import (
    RUNTIME_BIASED,
    SAMPLE_INDEX_KEYS,
    SYSTEMATIC_DB,
)
from stages.analyze.compare.verdict import FAIL, Verdict, finite
from stages.analyze.link.event_table import EventRow, unit_factor
from stages.analyze.link.linking import ProgramIndex, ops_of, source_line
from stages.analyze.link.node_names import names_of
from stages.analyze.link.source_frames import owner_source_line, user_source_line
from stages.formats.etdump.records import DELEGATE_CALL_EVENT, LOAD_BLOCK, METHOD_EVENT
from stages.formats.inputs_record import inputs_record
from stages.safe_io.json_text import json_safe

SUMMARY_FORMAT = "delegate-debugger-summary"
SUMMARY_VERSION = 1
_SLOW_KEYS = (
    "event_name",
    "op_names",
    "p50",
    "delegate_backend_name",
    "delegate_debug_identifier",
    "debug_handles",
    "link_source",
)


# Op names a group of `slowest_op_groups` lists (its `ops` counts them all).
_GROUP_NAMES = 24


@dataclass(frozen=True)
class RunFiles:
    """The analysed files, as the summary names them."""

    etdump: Path
    etrecord: Path | None
    debug_buffer: Path | None


def gap_record(
    row: GapRow,
    index: ProgramIndex,
    metric: str,
    threshold: float | None,
    diverged: bool,
    margin: float | None = None,
    node_names: dict[int, list[str]] | None = None,
) -> dict[str, Any]:
    """One numeric_gap.csv row: the group's ops and placement, its gaps (accumulated, local, and
    observed vs expected error), whether it diverged, and where it is in the model's source."""
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
        "comparison": row.comparison,
        "follows_flipped_branch": row.follows_flip,
    }
    for name, value in row.accumulated.items():
        record[name] = value
    for name, value in row.local.items():
        record[f"local_{name}"] = value
    record["gap_metric"] = metric
    record["threshold"] = threshold
    record.update(row.budget)  # observed vs expected local error (expected_error.py)
    if row.expected_fallback:  # its expected error is only the floor, and why
        record["expected_fallback"] = row.expected_fallback
    record["margin_db"] = margin if EXCESS_DB in row.budget else None
    record.update(per_sample_columns(row))
    record["diverged"] = diverged
    record["source_line"] = source_line(traces[-1]) if traces else ""
    record["user_source_line"] = user_source_line(traces[-1]) if traces else ""
    record["fault_nodes"] = names_of(node_names or {}, row.handles)
    record["module_hierarchy"] = ops["module_hierarchy"][-1] if ops["module_hierarchy"] else ""
    return record


def per_sample_columns(row: GapRow) -> dict[str, Any]:
    """A float row's statistics over the samples (gap/sample_stats.py): sample indices as
    integers, and whether its error is systematic."""
    if not row.per_sample:
        return {}
    columns: dict[str, Any] = {
        key: int(value) if key in SAMPLE_INDEX_KEYS else value
        for key, value in row.per_sample.items()
        if key != RUNTIME_BIASED
    }
    if SYSTEMATIC_DB in row.per_sample:
        columns[RUNTIME_BIASED] = bool(row.per_sample.get(RUNTIME_BIASED))
        columns["systematic"] = row.systematic
    return columns


def first_divergence(verdict: Verdict, index: ProgramIndex) -> dict[str, Any] | None:
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
        "comparison": row.comparison,
        **{key: finite(value) for key, value in row.budget.items()},
        **({"expected_fallback": row.expected_fallback} if row.expected_fallback else {}),
        "margin_db": verdict.margin if EXCESS_DB in row.budget else None,
        **{key: finite(value) for key, value in per_sample_columns(row).items()},
        # Integer/bool/index outputs: counted, not measured (stages/analyze/compare/exact_compare.py).
        **{
            f"{prefix}{key}": values[key]
            for prefix, values in (("", row.accumulated), ("local_", row.local))
            for key in EXACT_KEYS
            if row.comparison != "float" and key in values
        },
        "source_line": source_line(traces[-1]) if traces else "",
        "user_source_line": user_source_line(traces[-1]) if traces else "",
        "owner_source_line": owner_source_line(traces[-1]) if traces else "",
        "module_hierarchy": ops["module_hierarchy"][-1] if ops["module_hierarchy"] else "",
    }


def latency_ms(
    rows: list[EventRow], time_unit: str
) -> tuple[float | None, float | None, float | None]:
    """p50/p90 of Method::execute in ms (rows hold `time_unit`) and the delegated share of it."""
    analysed = rows[0].method if rows else ""  # several methods: the analysed one comes first
    method = [r for r in rows if r.event_name == METHOD_EVENT and r.count and r.method == analysed]
    if not method:
        return None, None, None
    main = max(method, key=lambda r: r.count)
    p50, p90 = main.stat("p50"), main.stat("p90")
    delegate = sum(
        r.stat("p50")
        for r in rows
        if r.event_name == DELEGATE_CALL_EVENT
        and r.event_block_name == main.event_block_name
        and r.method == analysed
    )
    per_ms = unit_factor(time_unit)
    # Per-call medians summed can exceed the method's median by timer noise: a share is <= 1.
    return p50 / per_ms, p90 / per_ms, (min(delegate / p50, 1.0) if p50 > 0 else None)


def clean(record: dict[str, Any]) -> dict[str, Any]:
    """`record` JSON-safe at any depth: a non-finite float is named ('nan', 'inf', '-inf'), in a
    nested record too (the instrumentation's, the accuracy's)."""
    return {k: json_safe(v) for k, v in record.items()}


def _op_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Op events of the timed blocks (not load/init, not the method or delegate wrappers) of
    the analysed method (listed first when a program has several), slowest first."""
    analysed = events[0].get("method", "") if events else ""
    ops = [
        e
        for e in events
        if e.get("method", "") == analysed
        and e["event_name"] not in (METHOD_EVENT, DELEGATE_CALL_EVENT)
        and e["event_block_name"] != LOAD_BLOCK
        and (e["debug_handles"] or e["is_delegated_op"] or e["instruction_id"] >= 0)
    ]
    return sorted(ops, key=lambda e: -e["p50"])


def slowest_ops(events: list[dict[str, Any]], top_k: int) -> list[dict[str, Any]]:
    """The `top_k` slowest op events (`_op_events`)."""
    return _op_events(events)[:top_k]


def op_label(event: dict[str, Any]) -> str:
    """'linear_2+gelu': the ops an event ran (its name when it names none)."""
    return "+".join(event.get("op_names") or []) or str(event["event_name"])


def slowest_op_groups(events: list[dict[str, Any]], top_k: int) -> list[dict[str, Any]]:
    """The `top_k` slowest distinct p50s, each with every op event that has it: one row for
    the kernels a cost model gives one time (the same work on a QNN-style backend), or for
    events a clock could not tell apart, instead of `top_k` rows of one value."""
    groups: dict[float, list[dict[str, Any]]] = {}
    for event in _op_events(events):
        if len(groups) == top_k and event["p50"] not in groups:
            break
        groups.setdefault(event["p50"], []).append(event)
    return [
        {
            "p50": finite(p50),
            "ops": len(members),
            "op_names": [op_label(e) for e in members[:_GROUP_NAMES]],
            "event_names": sorted({str(e["event_name"]) for e in members}),
            "backends": sorted({str(e["delegate_backend_name"] or "-") for e in members}),
        }
        for p50, members in groups.items()
    ]


def largest_gaps(gaps: list[dict[str, Any]], verdict: Verdict, top_k: int) -> list[dict[str, Any]]:
    """Compared rows with any gap, worst accumulated gap first; the first divergence's group is
    always among them (its accumulated gap is often smaller than the ops' downstream of it)."""
    metric = verdict.metric
    exact = math.inf if verdict.higher_is_better else 0.0
    inexact = [g for g in gaps if metric in g and g[metric] != exact]  # exact matches: no gap
    sign = 1.0 if verdict.higher_is_better else -1.0
    ranked = sorted(inexact, key=lambda g: sign * g[metric])
    top = ranked[:top_k]
    first = verdict.first_divergence
    diverged = [g for g in ranked[top_k:] if first is not None and g["group"] == first.group]
    if diverged and top_k > 0:
        top = [*top[: top_k - len(diverged[:1])], *diverged[:1]]
    return top


def _largest_keys(metric: str) -> tuple[str, ...]:
    """The columns summary.json's `largest_gaps` shows of each gap record."""
    return (
        "group",
        "op_names",
        "op_types",
        "diverged",
        metric,
        f"local_{metric}",
        "observed_snr_db",
        "expected_snr_db",
        "excess_db",
        "worst_sample",
        "systematic",
        "delegate_debug_identifiers",
        "source_line",
    )


def build_summary(
    files: RunFiles,
    record_model: str,
    index: ProgramIndex,
    verdict: Verdict,
    event_rows: list[EventRow],
    events: list[dict[str, Any]],
    gaps: list[dict[str, Any]],
    time_unit: str,
    top_k: int,
) -> dict[str, Any]:
    """Everything summary.json holds but the artifact paths and stage seconds."""
    metric = verdict.metric
    p50_ms, p90_ms, share = latency_ms(event_rows, time_unit)
    largest = largest_gaps(gaps, verdict, top_k)
    compared = [g[metric] for g in gaps if metric in g]
    pick = min if verdict.higher_is_better else max
    worst = largest[0][metric] if largest else (pick(compared) if compared else None)
    delegated = {h for m in index.maps for h in m.delegated_handles}
    reason = verdict.reason or (
        f"{verdict.diverged_rows} output(s) cross the threshold" if verdict.status == FAIL else ""
    )
    largest_keys = _largest_keys(metric)
    return {
        "format": SUMMARY_FORMAT,
        "version": SUMMARY_VERSION,
        "model": record_model,
        "backend": index.backend or "unknown",
        "precision": index.precision,
        # ExecuTorch's ETRecords: the graph compared with (the exported fp32 program for int8/fp16
        # runs of this tool), and how many q/dq-only handles were filed under the ops they serve.
        "reference_program": index.reference_graph or None,
        "qdq_handles_attributed": len(index.handle_attribution),
        "etdump": str(files.etdump),
        "etrecord": str(files.etrecord) if files.etrecord is not None else None,
        "debug_buffer": str(files.debug_buffer) if files.debug_buffer is not None else None,
        "verdict": verdict.status,
        "verdict_reason": reason,
        "verdict_cause": verdict.cause,
        "gap_metric": metric,
        "higher_is_better": verdict.higher_is_better,
        "threshold": verdict.threshold,
        "verdict_rule": "threshold" if verdict.margin is None else "expected",
        "margin_db": verdict.margin,
        "first_divergence": first_divergence(verdict, index),
        "latency_p50_ms": p50_ms,
        "latency_p90_ms": p90_ms,
        "delegated_time_share": share,
        "partitions": len(index.maps),
        "delegated_op_ratio": len(delegated) / len(index.handles) if index.handles else None,
        "max_gap": finite(worst) if worst is not None else None,
        "time_unit": time_unit,
        "slowest_ops": [clean({k: e[k] for k in _SLOW_KEYS}) for e in slowest_ops(events, top_k)],
        "slowest_op_groups": slowest_op_groups(events, top_k),
        "largest_gaps": [clean({k: g.get(k) for k in largest_keys}) for g in largest],
        "events": len(events),
        "compared_outputs": len(compared),
        # Which samples calibrated int8 and which were run and judged (the export's record).
        "inputs": inputs_record(files.etrecord),
    }
