"""The analyze stage: load → link → compare → report, each a pure step over loaded data."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stages.analyze.compare.bisect_entry import observe_bisection
from stages.analyze.compare.bisection import PrefixLowerings
from stages.analyze.compare.comparators import build_comparators
from stages.analyze.compare.end_to_end import ACCURACY_KEY, accuracy_metrics, run_accuracy
from stages.analyze.compare.exact_compare import tie_tolerance
from stages.analyze.compare.expected_error import qparams_from
from stages.analyze.compare.gap.evaluation import Gaps, evaluate_numeric_gap
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.compare.map_gate import gate_on_map_errors
from stages.analyze.compare.task_entry import task_inputs
from stages.analyze.compare.verdict import (
    Verdict,
    decide,
    metric_comparator,
    row_diverged,
    threshold_for,
)
from stages.analyze.compare.verdict_budget import VerdictBudget, verdict_budget
from stages.analyze.config import AnalyzeConfig, AnalyzeScope
from stages.analyze.generation.analysis import GenerationAnalysis
from stages.analyze.generation.entry import focused_inputs, generation_analysis
from stages.analyze.generation.step_gaps import GapOptions
from stages.analyze.generation.summary import add_generation, generation_metrics
from stages.analyze.link.event_table import event_record
from stages.analyze.link.linked_files import Linked, load_and_link, method_event_rows
from stages.analyze.report.bisect_summary import add_bisection
from stages.analyze.report.graph_outputs import write_graph_outputs
from stages.analyze.report.instrumentation import add_instrumentation
from stages.analyze.report.stage_files import write_plots, write_summary_and_report, write_tables
from stages.analyze.report.summary import RunFiles, build_summary, clean, gap_record
from stages.analyze.report.summary_facts import headline_metrics, link_facts, trace_gaps
from stages.analyze.report.trace_export import build_trace, left_out_warning, write_trace
from stages.formats.artifacts import ArtifactName
from stages.paused_gc import paused_gc


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
    generation_tables: tuple[Path, ...] = ()  # a generation's per-step CSVs


def _compare(
    linked: Linked,
    comparators: list[Any],
    gap_comparator: Any,
    threshold: float,
    budget: VerdictBudget,
    samples: list[Any] | None = None,
    accuracy_only: bool = False,
) -> tuple[Gaps, Verdict, list[dict[str, Any]]]:
    """Numeric gaps against the exported program, the verdict, and the gap table's records."""
    found = evaluate_numeric_gap(
        linked.inputs,
        linked.index,
        comparators,
        linked.program,
        linked.map_check,
        budget.floor_units,
        samples,
        accuracy_only,
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


def _compare_steps(
    cfg: AnalyzeConfig,
    linked: Linked,
    comparators: list[Any],
    generation_files: tuple[Path | None, Path | None],
) -> tuple[Gaps, Verdict, list[dict[str, Any]], GenerationAnalysis | None]:
    """`_compare` under the precision's threshold and budget; for a generation, every step first
    (stages.analyze.generation) and the plain tables of the first diverging (else first
    captured) step."""
    gap_comparator = metric_comparator(comparators, cfg.gap_metric)
    threshold = threshold_for(dict(cfg.thresholds), linked.index.precision)
    budget = verdict_budget(cfg, linked.index.precision)
    record = linked.inputs.etrecord
    options = GapOptions(
        comparators,
        gap_comparator,
        threshold,
        budget,
        tie_tolerance(linked.index.precision),
        record.representative_inputs if record is not None else [],
        qparams_from(record.lowering_info) if record is not None else {},
    )
    accuracy_only = cfg.scope == AnalyzeScope.accuracy
    generation = None
    if not accuracy_only:
        generation = generation_analysis(
            linked.inputs, linked.index, linked.map_check, linked.program, options, generation_files
        )
    compared, samples = linked, None
    if generation is not None and generation.focus_inputs is not None:
        compared = replace(linked, inputs=focused_inputs(linked.inputs, generation))
        samples = [generation.focus_inputs]
    found, verdict, gaps = _compare(
        compared, comparators, gap_comparator, threshold, budget, samples, accuracy_only
    )
    return found, verdict, gaps, generation


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


def _summary(
    cfg: AnalyzeConfig,
    files: RunFiles,
    linked: Linked,
    tables: tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]],
    found: Gaps,
    verdict: Verdict,
    bisect: tuple[PrefixLowerings | None, Path] = (None, Path()),
) -> dict[str, Any]:
    """summary.json's content: the run's figures (`build_summary`), what linking found and what
    a bisection found (runtime.observe=bisect)."""
    event_rows, events, gaps = tables
    record = linked.inputs.etrecord
    summary = build_summary(
        files,
        record.model_name if record is not None else "",
        linked.index,
        verdict,
        event_rows,
        events,
        gaps,
        cfg.time_unit,
        cfg.top_k,
    )
    budget = verdict_budget(cfg, linked.index.precision)
    bisected = observe_bisection(linked, verdict, found, budget, *bisect)
    partition = bisected[1].record() if bisected and bisected[0].partition_id is not None else None
    link_facts(summary, verdict, found, linked, events, partition)
    add_bisection(summary, bisected, linked.index)
    gate_on_map_errors(summary, linked.index, str(cfg.map_errors))
    return summary


def _trace(
    run_dir: Path,
    linked: Linked,
    gaps: list[dict[str, Any]],
    metric: str,
    iterations: int | None,
    summary: dict[str, Any],
) -> Path:
    """trace.json, and a warning in the summary when it leaves blocks out."""
    trace_path = run_dir / ArtifactName.TRACE_JSON
    trace = build_trace(linked.inputs.etdump, linked.index, trace_gaps(gaps, metric), iterations)
    write_trace(trace_path, trace)
    left_out = left_out_warning(trace, trace_path)
    summary["warnings"] += [left_out] if left_out else []
    return trace_path


def _plots(
    cfg: AnalyzeConfig,
    run_dir: Path,
    summary: dict[str, Any],
    events: list[dict[str, Any]],
    gaps: list[dict[str, Any]],
    rows: list[GapRow],
) -> list[Path]:
    """The run's plots; none under analyze.scope=accuracy or verdict (a search trial's)."""
    if cfg.scope != AnalyzeScope.full:
        return []
    return list(write_plots(run_dir, summary, events, (gaps, rows), cfg.top_k))


@paused_gc()  # a batch of mostly acyclic rows: heap-wide collections only cost time
def run_analyze(
    cfg: AnalyzeConfig,
    etdump: Path,
    debug_buffer: Path | None,
    etrecord: Path | None,
    run_dir: Path,
    pte: Path | None = None,
    step_inputs: Path | None = None,
    generation_file: Path | None = None,
    instrumentation: Path | None = None,
    prefix_lowerings: PrefixLowerings | None = None,
    labels: Path | None = None,
) -> AnalyzeArtifacts:
    """events.csv, numeric_gap.csv, summary.json, trace.json, plots, report.html (+ generation)."""
    started, _ = time.perf_counter(), bounded_options(cfg)
    task = task_inputs(cfg, labels, Path.cwd())  # analyze.task: resolved before any work
    comparators = build_comparators(list(cfg.comparators), cfg.custom_comparator)
    linked = load_and_link(cfg, etdump, debug_buffer, etrecord, pte)
    index, record = linked.index, linked.inputs.etrecord  # then link: events and their stats
    event_rows = method_event_rows(linked, cfg.time_unit, bounded_options(cfg)[0])
    events = [event_record(r, cfg.time_unit) for r in event_rows]
    link_seconds = time.perf_counter() - started
    # Compare: numeric gap against the exported program, and the verdict.
    gap_started = time.perf_counter()
    found, verdict, gaps, generation = _compare_steps(
        cfg, linked, comparators, (step_inputs, generation_file)
    )
    gap_seconds = time.perf_counter() - gap_started
    events_path, gap_path = write_tables(run_dir, events, gaps)  # Report.
    files, table_rows = RunFiles(etdump, etrecord, debug_buffer), (event_rows, events, gaps)
    summary = _summary(cfg, files, linked, table_rows, found, verdict, (prefix_lowerings, run_dir))
    accuracy = metric_comparator(comparators, cfg.gap_metric), cfg.accuracy_budget, task
    summary[ACCURACY_KEY] = run_accuracy(linked.inputs, *accuracy)
    add_instrumentation(summary, instrumentation, index, gaps)  # runtime.observe=tap
    graph = write_graph_outputs(run_dir, record, index, events, gaps, summary)
    plots = _plots(cfg, run_dir, summary, events, gaps, found.rows)
    plots += (tables := add_generation(summary, generation, run_dir))[2:]  # its plot
    trace_path = _trace(run_dir, linked, gaps, verdict.metric, cfg.trace_iterations, summary)
    summary_path, report_path = write_summary_and_report(
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
        metrics=headline_metrics(clean(summary), verdict, gap_seconds)
        | accuracy_metrics(summary[ACCURACY_KEY])
        | generation_metrics(generation),
        generation_tables=tables[:2],
    )
