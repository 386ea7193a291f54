"""The analyze stage: load → link → compare → report, each a pure step over loaded data."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch.export import ExportedProgram

from stages.analyze.compare.comparators import build_comparators
from stages.analyze.compare.exact_compare import tie_tolerance
from stages.analyze.compare.input_mismatch import every_output_differs, inputs_note
from stages.analyze.compare.map_gate import gate_on_map_errors
from stages.analyze.compare.numeric_gap import GapRow, numeric_gap_and_flow, runtime_outputs
from stages.analyze.compare.verdict import (
    Verdict,
    decide,
    metric_comparator,
    row_diverged,
    threshold_for,
)
from stages.analyze.compare.verdict_budget import VerdictBudget, verdict_budget
from stages.analyze.config import AnalyzeConfig
from stages.analyze.link.control_flow import CondRecord, cond_sites, untaken_fault_warnings
from stages.analyze.link.event_table import EVENT_COLUMNS, build_event_rows, event_record, write_csv
from stages.analyze.link.input_warnings import input_warnings
from stages.analyze.link.linking import ProgramIndex, check_same_program
from stages.analyze.link.map_check import (
    MapCheck,
    check_runtime_maps,
    log_findings,
    map_not_evaluated,
    unobserved_inputs_note,
    whole_partition_divergence,
)
from stages.analyze.link.metadata_parsers import resolve_parser
from stages.analyze.link.methods import (
    MethodPart,
    absent_method_warning,
    analysed_method_absent,
    method_parts,
    unanalysed_warning,
)
from stages.analyze.link.node_names import fault_node_names, names_of
from stages.analyze.link.program_identity import (
    UNPROVEN,
    AnalysedFiles,
    check_logged_outputs,
    prove_identity,
)
from stages.analyze.link.xnnpack_graphs import load_xnnpack_graphs
from stages.analyze.link.xnnpack_recovery import (
    RecoveryReport,
    link_source_counts,
    needs_recovery,
    recover_links,
)
from stages.analyze.load.loading import AnalysisInputs, load_inputs
from stages.analyze.load.unused_inputs import NotEvaluated, gap_blocker, no_outputs
from stages.analyze.load.unused_inputs import report as report_unused
from stages.analyze.report.graph_outputs import write_graph_outputs
from stages.analyze.report.html_report import render_report, write_report
from stages.analyze.report.plots import has_inexact, plot_gap, plot_top_ops
from stages.analyze.report.summary import RunFiles, build_summary, clean, gap_record, slowest_ops
from stages.analyze.report.trace_export import build_trace, left_out_warning, write_trace
from stages.formats.artifacts import ArtifactName
from stages.formats.atomic_write import write_text_atomic
from stages.formats.delegate_map_findings import ERROR, MAP_CHECK_KEY
from stages.formats.etdump.streaming import holds_debug_events
from stages.formats.paused_gc import paused_gc

TOP_OPS_SVG = "top_ops_p50.svg"
GAP_SVG = "numeric_gap.svg"
# MLflow metrics must be finite: an exact match (SNR = inf dB) is logged as this many dB.
SNR_METRIC_CAP_DB = 300.0


@dataclass(frozen=True)
class AnalyzeArtifacts:
    """Files the analyze stage wrote, plus its headline metrics."""

    events: Path
    numeric_gap: Path
    summary: Path
    trace: Path
    report: Path
    plots: tuple[Path, ...]
    overlays: tuple[Path, ...] = ()  # Model Explorer node-data files
    metrics: dict[str, float] = field(default_factory=dict)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False))


@dataclass(frozen=True)
class _Gaps:
    """Gap rows and cond records (or why there are none), the inputs note, and per handle the
    node names `backend.fault.node` takes."""

    rows: list[GapRow]
    flows: list[CondRecord]
    not_evaluated: NotEvaluated | None
    inputs_note: str = ""
    node_names: dict[int, list[str]] = field(default_factory=dict)


def _numeric_gap(
    inputs: AnalysisInputs,
    index: ProgramIndex,
    comparators: list[Any],
    program: ExportedProgram | None,
    map_check: MapCheck | None = None,
    floor_units: float = 0.0,
) -> _Gaps:
    """Gap rows and cond records, or none and why they cannot be computed; and a note when every
    input-dependent output differs (the run's inputs may not be the ETRecord's)."""
    blocker = gap_blocker(inputs)
    record, buffer = inputs.etrecord, inputs.debug_buffer
    if blocker is not None or record is None or buffer is None:
        return _Gaps([], [], blocker)
    logged = replace(inputs.etdump, run_data=[*filter(holds_debug_events, inputs.etdump.run_data)])
    outputs = runtime_outputs(
        logged, buffer.payload, index, str(inputs.debug_buffer_path), map_check
    )
    program = program or record.exported_program()
    names = fault_node_names(program.graph_module)
    if not outputs:
        return _Gaps([], [], no_outputs(inputs), node_names=names)
    groups, rows, flows = numeric_gap_and_flow(
        outputs,
        program,
        record.representative_inputs,
        comparators,
        tie_tolerance(index.precision),
        index.precision,
        floor_units,
    )
    differ, compared = every_output_differs(rows, groups, program)
    note = inputs_note(differ, compared, str(inputs.etrecord_path))
    if map_check is not None and map_check.explains_divergence():
        note = ""  # a map or logging error explains differing outputs better than the inputs
    return _Gaps(rows, flows, None, note, names)


def _fault_warnings(
    record: Any, flows: list[CondRecord], program: ExportedProgram | None
) -> list[str]:
    """The lower stage's warnings about the injected fault, and a fault in a branch never run."""
    fault = record.lowering_info.get("fault_injected") if record is not None else None
    if not isinstance(fault, dict):
        return []
    warnings = [str(w) for w in fault.get("warnings", [])]
    if flows:
        gm = (program or record.exported_program()).graph_module
        warnings += untaken_fault_warnings(cond_sites(gm), flows, fault)
    return warnings


def _plots(
    run_dir: Path,
    summary: dict[str, Any],
    events: list[dict[str, Any]],
    gaps: list[dict[str, Any]],
    top_k: int,
) -> list[Path]:
    plots: list[Path] = []
    slowest = slowest_ops(events, top_k)
    if slowest:
        plot_top_ops(
            run_dir / TOP_OPS_SVG,
            ["+".join(e["op_names"]) or e["event_name"] for e in slowest],
            [e["p50"] for e in slowest],
            [bool(e["is_delegated_op"]) for e in slowest],
            summary["time_unit"],
        )
        plots.append(run_dir / TOP_OPS_SVG)
    metric = summary["gap_metric"]
    compared = [g for g in gaps if g["status"] == "ok" and metric in g]
    values = [float(g[metric]) for g in compared]
    if compared and has_inexact(values, bool(summary["higher_is_better"])):
        first = summary["first_divergence"]
        first_x = (
            next((i for i, g in enumerate(compared) if g["group"] == first["group"]), None)
            if first
            else None
        )
        plot_gap(
            run_dir / GAP_SVG,
            [float(g[metric]) for g in compared],
            [float(g.get(f"local_{metric}", g[metric])) for g in compared],
            summary["threshold"],
            metric,
            first_x,
        )
        plots.append(run_dir / GAP_SVG)
    return plots


def _metrics(summary: dict[str, Any], verdict: Verdict, gap_seconds: float) -> dict[str, float]:
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


@dataclass(frozen=True)
class _Linked:
    """The loaded files, the program index linking them, and what was proven about them."""

    inputs: AnalysisInputs
    index: ProgramIndex
    identity: Any
    program: ExportedProgram | None
    parser: Any
    map_check: MapCheck = field(default_factory=MapCheck)
    recovery: RecoveryReport | None = None
    methods: list[MethodPart] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _recover(
    index: ProgramIndex, inputs: AnalysisInputs, etrecord: Path | None, pte: Path | None
) -> tuple[ProgramIndex, RecoveryReport | None]:
    """XNNPACK kernel links from the serialized graphs, for calls whose delegate left no map."""
    wanted = needs_recovery(index)
    if not wanted:
        return index, None
    graphs, source = load_xnnpack_graphs(index, etrecord, pte, wanted)
    record = inputs.etrecord
    program = record.exported_program() if record is not None and graphs else None
    return recover_links(index, inputs.etdump, graphs, source, program)


def _load_and_link(
    cfg: AnalyzeConfig,
    etdump: Path,
    debug_buffer: Path | None,
    etrecord: Path | None,
    pte: Path | None = None,
) -> _Linked:
    """Load the files, refuse a foreign pairing, and prove (or check) program identity."""
    program_path = Path(cfg.exported_program).expanduser() if cfg.exported_program else None
    inputs = load_inputs(etdump, debug_buffer, etrecord, cfg.method, program_path)
    record = inputs.etrecord
    index = ProgramIndex.from_etrecord(record) if record is not None else ProgramIndex.empty()
    info = record.lowering_info if record is not None else {}
    method = str(info.get("method", "")) if record is not None else ""
    methods = [str(m) for m in info.get("methods", [])]
    parts = method_parts(inputs.etdump, index, method, methods)
    warnings = unanalysed_warning(parts, method, methods)
    warnings += input_warnings(inputs.etdump, index, str(etdump), str(etrecord), record is not None)
    if index.linked and analysed_method_absent(parts, index, methods):
        warnings.append(absent_method_warning(str(etrecord), method, methods, len(parts)))
        parts = [MethodPart(f"method {i + 1}", p.dump, True) for i, p in enumerate(parts)]
        index = ProgramIndex.empty()
    if index.linked:  # link, prove and compare the ETRecord's method only
        inputs = replace(inputs, etdump=next(p.dump for p in parts if p.analysed))
    check_same_program(inputs.etdump, index, str(etdump), str(etrecord))
    delegates_own = index
    index, recovery = _recover(index, inputs, etrecord, pte)
    files = AnalysedFiles(str(etdump), str(etrecord), str(debug_buffer))
    identity = prove_identity(inputs.etdump, inputs.debug_buffer, index, files, record is not None)
    program = None
    if identity.status == UNPROVEN and record is not None:  # check what can be checked
        program = record.exported_program()
        identity = check_logged_outputs(identity, inputs.etdump, index, program)
    parser = resolve_parser(
        cfg.delegate_metadata_parser,
        index.backend,
        record.lowering_info.get("backend_target") if record is not None else None,
    )
    # The map check judges the delegates' own maps, never the analysis's recovered ones.
    map_check = check_runtime_maps(inputs.etdump, delegates_own, record)
    log_findings(map_check)
    return _Linked(inputs, index, identity, program, parser, map_check, recovery, parts, warnings)


def _trace_gaps(gaps: list[dict[str, Any]], metric: str) -> dict[tuple[Any, ...], Any]:
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


def _write_tables(
    run_dir: Path, events: list[dict[str, Any]], gaps: list[dict[str, Any]]
) -> tuple[Path, Path]:
    """events.csv and numeric_gap.csv (float and exact rows share the gap table)."""
    events_path = run_dir / ArtifactName.EVENTS_CSV
    gap_path = run_dir / ArtifactName.NUMERIC_GAP_CSV
    write_csv(events_path, EVENT_COLUMNS, events)
    columns = tuple(dict.fromkeys(key for g in gaps for key in g))
    write_csv(gap_path, columns or ("group", "status"), gaps)
    return events_path, gap_path


def _write_summary_and_report(
    run_dir: Path,
    summary: dict[str, Any],
    tables: tuple[Path, Path, Path],
    plots: list[Path],
    graph: Any,
    rows: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    seconds: dict[str, float],
) -> tuple[Path, Path]:
    """summary.json (with where every artifact is and the stage's timings) and report.html."""
    events_path, gap_path, trace_path = tables
    summary_path = run_dir / ArtifactName.SUMMARY_JSON
    report_path = run_dir / ArtifactName.REPORT_HTML
    summary["artifacts"] = {
        "events": str(events_path),
        "numeric_gap": str(gap_path),
        "trace": str(trace_path),
        "report": str(report_path),
        "plots": [str(p) for p in plots],
        "overlays": [str(p) for p in graph.overlays],
    }
    summary["seconds"] = {
        "link": seconds["link"],
        "numeric_gap": seconds["numeric_gap"],
        "total": time.perf_counter() - seconds["started"],
    }
    cleaned_summary = clean(summary)
    _write_json(summary_path, cleaned_summary)
    events, gaps = [clean(e) for e in rows[0]], [clean(g) for g in rows[1]]
    report = render_report(cleaned_summary, events, gaps, plots, graph.report_section)
    write_report(report_path, report)
    return summary_path, report_path


def _compare(
    linked: _Linked,
    comparators: list[Any],
    gap_comparator: Any,
    threshold: float,
    budget: VerdictBudget,
) -> tuple[_Gaps, Verdict, list[dict[str, Any]]]:
    """Numeric gaps against the exported program, the verdict, and the gap table's records."""
    found = _numeric_gap(
        linked.inputs,
        linked.index,
        comparators,
        linked.program,
        linked.map_check,
        budget.floor_units,
    )
    gap_rows, flows, note = found.rows, found.flows, found.inputs_note
    reason = found.not_evaluated.why if found.not_evaluated is not None else ""
    margin = budget.margin
    verdict = decide(gap_rows, gap_comparator, threshold, bool(gap_rows), reason, flows, margin)
    if note and verdict.status == "fail":
        verdict = replace(verdict, reason=f"{verdict.reason}; {note}" if verdict.reason else note)
    metric, better = verdict.metric, verdict.higher_is_better
    gaps = [
        gap_record(
            r,
            linked.index,
            metric,
            threshold,
            row_diverged(r, metric, threshold, better, margin),
            margin,
            found.node_names,
        )
        for r in gap_rows
    ]
    return found, verdict, gaps


def _complete_summary(
    summary: dict[str, Any], verdict: Verdict, found: _Gaps, linked: _Linked
) -> None:
    """The first divergence's fault-node names; identity, control flow and warnings (what was
    not evaluated comes with the map check, `_add_map_check`)."""
    record = linked.inputs.etrecord
    takes_faults = record is None or record.lowering_info.get("applies_faults", True) is not False
    if summary["first_divergence"] is not None and verdict.first_divergence is not None:
        handles = verdict.first_divergence.handles
        # Named as backend.fault.node takes it, only for a backend that takes faults at all.
        names = names_of(found.node_names, handles) if takes_faults else []
        summary["first_divergence"]["fault_nodes"] = names
    summary["program_identity"] = linked.identity.record()
    summary["control_flow"] = [f.record() for f in found.flows]
    summary["warnings"] = _fault_warnings(linked.inputs.etrecord, found.flows, linked.program)


def _event_rows(linked: _Linked, time_unit: str, exact_samples: int) -> list[Any]:
    """Event rows per method (instruction ids overlap across methods), the analysed method's
    first; only the method the ETRecord describes is linked through it."""
    return [
        row
        for part in sorted(linked.methods, key=lambda p: not p.analysed)  # analysed first
        for row in build_event_rows(
            part.dump,
            linked.index if part.analysed else ProgramIndex.empty(),
            linked.parser,
            time_unit,
            part.name,
            exact_samples,
        )
    ]


def _add_map_check(
    summary: dict[str, Any], linked: _Linked, verdict: Verdict, unused: NotEvaluated | None
) -> None:
    """The delegate map findings, what they kept out of the numeric gap, and what they mean
    for the first divergence (a whole partition, or unobserved inputs)."""
    check = linked.map_check
    summary[MAP_CHECK_KEY] = check.records()
    first = whole_partition_divergence(check, linked.index, summary["first_divergence"])
    row = verdict.first_divergence
    unobserved_inputs_note(first, row.unobserved_inputs if row else ())
    summary["first_divergence"] = first
    # Without a numeric gap at all, what the map kept out of it is not worth listing.
    items = [unused] if unused is not None else map_not_evaluated(check)
    summary["not_evaluated"] = report_unused(items)


def _link_facts(
    summary: dict[str, Any], verdict: Verdict, found: _Gaps, linked: _Linked, events: list[Any]
) -> None:
    """What linking found, into the summary: link sources, recovery, map check, methods."""
    _complete_summary(summary, verdict, found, linked)
    summary["link_sources"] = link_source_counts(events)
    if linked.recovery is not None:
        summary["xnnpack_recovery"] = linked.recovery.record()
    _add_map_check(summary, linked, verdict, found.not_evaluated)
    summary["warnings"] = linked.warnings + summary.get("warnings", [])
    summary["methods"] = [p.name for p in linked.methods if p.name]
    analysed = (p.name for p in linked.methods if p.analysed and linked.index.linked)
    summary["method"] = next(analysed, "")


class AnalyzeOptionError(ValueError):
    """An analyze option outside its range; the message names it and what to give."""


def bounded_options(cfg: AnalyzeConfig) -> tuple[int, int | None]:
    """analyze.latency_exact_samples and analyze.trace_iterations, checked."""
    if cfg.latency_exact_samples < 0:
        raise AnalyzeOptionError(
            f"analyze.latency_exact_samples={cfg.latency_exact_samples}: give a count >= 0 "
            "(durations an event row keeps exactly before it sketches them)"
        )
    if cfg.trace_iterations is not None and cfg.trace_iterations < 0:
        raise AnalyzeOptionError(
            f"analyze.trace_iterations={cfg.trace_iterations}: give a count >= 0 of blocks per "
            "name trace.json shows, or null for all"
        )
    return cfg.latency_exact_samples, cfg.trace_iterations


@paused_gc()  # a batch of mostly acyclic rows: heap-wide collections only cost time
def run_analyze(
    cfg: AnalyzeConfig,
    etdump: Path,
    debug_buffer: Path | None,
    etrecord: Path | None,
    run_dir: Path,
    pte: Path | None = None,
) -> AnalyzeArtifacts:
    """Write events.csv, numeric_gap.csv, summary.json, trace.json, plots and report.html."""
    started = time.perf_counter()
    bounded_options(cfg)
    comparators = build_comparators(list(cfg.comparators), cfg.custom_comparator)
    gap_comparator = metric_comparator(comparators, cfg.gap_metric)
    linked = _load_and_link(cfg, etdump, debug_buffer, etrecord, pte)
    inputs, index, record = linked.inputs, linked.index, linked.inputs.etrecord
    threshold = threshold_for(dict(cfg.thresholds), index.precision)
    budget = verdict_budget(cfg, index.precision)

    # Link: events and their stats.
    event_rows = _event_rows(linked, cfg.time_unit, bounded_options(cfg)[0])
    events = [event_record(r, cfg.time_unit) for r in event_rows]
    link_seconds = time.perf_counter() - started

    # Compare: numeric gap against the exported program, and the verdict.
    gap_started = time.perf_counter()
    found, verdict, gaps = _compare(linked, comparators, gap_comparator, threshold, budget)
    gap_seconds = time.perf_counter() - gap_started
    metric = verdict.metric

    # Report.
    events_path, gap_path = _write_tables(run_dir, events, gaps)
    summary = build_summary(
        RunFiles(etdump, etrecord, debug_buffer),
        record.model_name if record is not None else "",
        index,
        verdict,
        event_rows,
        events,
        gaps,
        cfg.time_unit,
        cfg.top_k,
    )
    _link_facts(summary, verdict, found, linked, events)
    gate_on_map_errors(summary, linked.index, str(cfg.map_errors))
    graph = write_graph_outputs(run_dir, record, index, events, gaps, summary)
    plots = _plots(run_dir, summary, events, gaps, cfg.top_k)
    trace_path = run_dir / ArtifactName.TRACE_JSON
    trace = build_trace(inputs.etdump, index, _trace_gaps(gaps, metric), cfg.trace_iterations)
    write_trace(trace_path, trace)
    left_out = left_out_warning(trace, trace_path)
    summary["warnings"] += [left_out] if left_out else []
    summary_path, report_path = _write_summary_and_report(
        run_dir,
        summary,
        (events_path, gap_path, trace_path),
        plots,
        graph,
        (events, gaps),
        {"link": link_seconds, "numeric_gap": gap_seconds, "started": started},
    )
    return AnalyzeArtifacts(
        events=events_path,
        numeric_gap=gap_path,
        summary=summary_path,
        trace=trace_path,
        report=report_path,
        plots=tuple(plots),
        overlays=graph.overlays,
        metrics=_metrics(clean(summary), verdict, gap_seconds),
    )
