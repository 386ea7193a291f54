"""What linking and comparing found, into summary.json: fault-node names, identity, control
flow, the map check, methods; the trace's gap args and the headline metrics for MLflow."""

from __future__ import annotations

import math
from typing import Any

from stages.analyze.compare.gap.evaluation import Gaps, fault_warnings
from stages.analyze.compare.verdict import (
    Verdict,
)
from stages.analyze.link.linked_files import Linked
from stages.analyze.link.map_check import (
    map_not_evaluated,
    unobserved_inputs_note,
    whole_partition_divergence,
)
from stages.analyze.link.node_names import names_of
from stages.analyze.link.xnnpack.recovery import (
    link_source_counts,
)
from stages.analyze.load.unused_inputs import NotEvaluated
from stages.analyze.load.unused_inputs import report as report_unused
from stages.analyze.report.summary import clean
from stages.backends.delegate_map_findings import ERROR, MAP_CHECK_KEY

# MLflow metrics must be finite: an exact match (SNR = inf dB) is logged as this many dB.
SNR_METRIC_CAP_DB = 300.0


def complete_summary(
    summary: dict[str, Any], verdict: Verdict, found: Gaps, linked: Linked
) -> None:
    """The first divergence's fault-node names; identity, control flow and warnings (what was
    not evaluated comes with the map check, `add_map_check`)."""
    record = linked.inputs.etrecord
    takes_faults = record is None or record.lowering_info.get("applies_faults", True) is not False
    if summary["first_divergence"] is not None and verdict.first_divergence is not None:
        handles = verdict.first_divergence.handles
        # Named as backend.fault.node takes it, only for a backend that takes faults at all.
        names = names_of(found.node_names, handles) if takes_faults else []
        summary["first_divergence"]["fault_nodes"] = names
    # Kernel times from a cost model (QNN-style): equal work, equal times (the slowest ops say so).
    summary["timed_by_cost_model"] = bool(
        record is not None and record.lowering_info.get("timed_by_cost_model")
    )
    if record is not None and record.lowering_info.get("group_size"):  # 8da4w
        summary["group_size"] = record.lowering_info["group_size"]
        summary["left_in_float"] = list(record.lowering_info.get("left_in_float") or [])
    summary["program_identity"] = linked.identity.record()
    summary["control_flow"] = [f.record() for f in found.flows]
    summary["warnings"] = fault_warnings(linked.inputs.etrecord, found.flows, linked.program)


def add_map_check(
    summary: dict[str, Any],
    linked: Linked,
    verdict: Verdict,
    unused: NotEvaluated | None,
    bisected: dict[str, Any] | None = None,
) -> None:
    """The delegate map findings, what they kept out of the numeric gap, and what they mean
    for the first divergence (a whole partition, blamed on the op bisection found in it when
    `bisected` says so; or unobserved inputs)."""
    check = linked.map_check
    summary[MAP_CHECK_KEY] = check.records()
    first = whole_partition_divergence(check, linked.index, summary["first_divergence"], bisected)
    row = verdict.first_divergence
    unobserved_inputs_note(first, row.unobserved_inputs if row else ())
    summary["first_divergence"] = first
    # Without a numeric gap at all, what the map kept out of it is not worth listing.
    items = [unused] if unused is not None else map_not_evaluated(check)
    summary["not_evaluated"] = report_unused(items)


def link_facts(
    summary: dict[str, Any],
    verdict: Verdict,
    found: Gaps,
    linked: Linked,
    events: list[Any],
    bisected: dict[str, Any] | None = None,
) -> None:
    """What linking found, into the summary: link sources, recovery, map check, methods."""
    complete_summary(summary, verdict, found, linked)
    summary["link_sources"] = link_source_counts(events)
    if linked.recovery is not None:
        summary["xnnpack_recovery"] = linked.recovery.record()
    add_map_check(summary, linked, verdict, found.not_evaluated, bisected)
    summary["warnings"] = linked.warnings + summary.get("warnings", [])
    summary["methods"] = [p.name for p in linked.methods if p.name]
    analysed = (p.name for p in linked.methods if p.analysed and linked.index.linked)
    summary["method"] = next(analysed, "")


def headline_metrics(
    summary: dict[str, Any], verdict: Verdict, gap_seconds: float
) -> dict[str, float]:
    """Headline metrics for MLflow; non-finite gaps are capped (SNR) since MLflow needs floats."""
    metrics = {
        "events": float(summary["events"]),
        "compared_outputs": float(summary["compared_outputs"]),
        "verdict_pass": 1.0 if summary["verdict"] == "pass" else 0.0,
        "diverged_outputs": float(verdict.diverged_rows),
        "partitions": float(summary["partitions"]),
        "numeric_gap_seconds": gap_seconds,
        "delegate_map_errors": float(
            sum(f["severity"] == ERROR for f in summary.get(MAP_CHECK_KEY, []))
        ),
        "delegate_map_warnings": float(
            sum(f["severity"] != ERROR for f in summary.get(MAP_CHECK_KEY, []))
        ),
    }
    first = summary["first_divergence"] or {}
    optional = {
        "latency_p50_ms": summary["latency_p50_ms"],
        "latency_p90_ms": summary["latency_p90_ms"],
        "delegated_time_share": summary["delegated_time_share"],
        "delegated_op_ratio": summary["delegated_op_ratio"],
        "max_gap": summary["max_gap"],
        "first_divergence_gap": first.get("local_gap"),
    }
    for key, value in optional.items():
        if isinstance(value, str):  # 'inf' / '-inf' / 'nan' from finite()
            value = float(value)
        if isinstance(value, int | float) and not math.isnan(value):
            cap = SNR_METRIC_CAP_DB if verdict.metric == "snr" and key.endswith("gap") else 1e300
            metrics[key] = max(-cap, min(cap, float(value)))
    return metrics


def trace_gaps(gaps: list[dict[str, Any]], metric: str) -> dict[tuple[Any, ...], Any]:
    """Per handle group, the gap values a trace slice shows in its args."""
    return {
        tuple(g["debug_handles"]): clean(
            {
                f"gap_{metric}": g.get(metric),
                f"local_gap_{metric}": g.get(f"local_{metric}"),
                "diverged": g["diverged"],
            }
        )
        for g in gaps
    }
