"""Compare finished runs: a table and a latency-vs-gap plot per (model, backend, precision), and
per-op comparisons across backends for each model (rows keyed by the exported program's ops).
Used by the sweep callback (tracked or not) and pipeline.tools.compare."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.sweeps.op_alignment import (
    OpRow,
    RunOps,
    align,
    read_op_gaps,
    read_timed_ops,
)
from pipeline.sweeps.op_table import format_op_rows
from pipeline.sweeps.run_sources import RunSource, mlflow_sources, runtime_kind


@dataclass(frozen=True)
class RunRow:
    """One run in comparison_runs.csv. max_gap is in gap_metric's unit (snr: dB)."""

    model: str
    backend: str
    precision: str
    # Who measured the latencies (emulated Python kernels or a C++ runtime): never ranked
    # against each other.
    runtime: str
    status: str
    verdict: str
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    max_gap: float | None
    gap_metric: str
    # From the run's summary.json: which way its gap metric improves.
    higher_is_better: bool | None
    delegated_time_share: float | None
    delegated_op_ratio: float | None
    partitions: float | None
    first_divergence: str
    run_id: str
    run_dir: str

    @property
    def label(self) -> str:
        return f"{self.backend}-{self.precision}"


RUN_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunRow))
TABLE_COLUMNS: tuple[str, ...] = (
    "model",
    "backend",
    "precision",
    "runtime",
    "status",
    "verdict",
    "latency_p50_ms",
    "max_gap",
    "gap_metric",
    "first_divergence",
    "run_id",  # two runs of one config print alike but for this
)


@dataclass(frozen=True)
class Comparison:
    runs: Path
    plot: Path | None
    per_op: tuple[Path, ...]
    text: str


def _run_row(source: RunSource) -> RunRow:
    tags, metrics = source.tags, source.metrics
    summary = source.summary()
    divergence = summary.get("first_divergence")
    verdict = metrics.get("verdict_pass")
    backend = tags.get("backend", "")
    return RunRow(
        model=tags.get("model", ""),
        backend=backend,
        precision=tags.get("precision", ""),
        runtime=runtime_kind(backend, summary),
        status=source.status,
        verdict=str(summary.get("verdict") or "")
        or ("" if verdict is None else ("pass" if verdict == 1.0 else "fail")),
        latency_p50_ms=metrics.get("latency_p50_ms"),
        latency_p90_ms=metrics.get("latency_p90_ms"),
        max_gap=metrics.get("max_gap"),
        gap_metric=str(summary.get("gap_metric", "")),
        higher_is_better=summary.get("higher_is_better"),
        delegated_time_share=metrics.get("delegated_time_share"),
        delegated_op_ratio=metrics.get("delegated_op_ratio"),
        partitions=metrics.get("partitions"),
        first_divergence="+".join(divergence["op_names"]) if divergence else "",
        run_id=source.run_id,
        run_dir=tags.get("run_dir", ""),
    )


def run_rows(sources: Sequence[RunSource]) -> list[RunRow]:
    rows = [_run_row(source) for source in sources]
    return sorted(rows, key=lambda r: (r.model, r.backend, r.precision))


def per_op_rows(sources: Sequence[RunSource], rows: list[RunRow], model: str) -> list[OpRow]:
    """One row per group of the exported program's ops: p50 and local gap under each run."""
    by_id = {id(s): s for s in sources}
    runs = []
    for row, source_id in zip(rows, _source_ids(sources, rows), strict=True):
        if row.model != model or row.status != "FINISHED":
            continue
        source = by_id[source_id]
        events, gaps = source.fetch("events.csv"), source.fetch("numeric_gap.csv")
        runs.append(
            RunOps(
                label=row.label,
                runtime=row.runtime,
                timed=read_timed_ops(events) if events is not None else [],
                gaps=read_op_gaps(gaps) if gaps is not None else [],
                higher_is_better=row.higher_is_better,
            )
        )
    return align(runs)


def _source_ids(sources: Sequence[RunSource], rows: list[RunRow]) -> list[int]:
    """The source each (sorted) row came from, by its run dir or run id."""
    index = {(s.run_id, s.tags.get("run_dir", "")): id(s) for s in sources}
    return [index[(r.run_id, r.run_dir)] for r in rows]


def _write_csv(
    path: Path, rows: list[dict[str, Any]], columns: Sequence[str] | None = None
) -> None:
    from stages.analyze.link.event_table import write_csv

    write_csv(path, tuple(columns or dict.fromkeys(k for r in rows for k in r)), rows)


def _plot(path: Path, rows: list[RunRow]) -> Path | None:
    points = [
        (r, r.latency_p50_ms, r.max_gap)
        for r in rows
        if r.latency_p50_ms is not None and r.max_gap is not None
    ]
    if not points:
        return None
    from stages.analyze.report.plots import Point, plot_points

    metrics = ", ".join(sorted({r.gap_metric or "?" for r, _, _ in points}))
    plot_points(
        path,
        [Point(latency_ms, gap, f"{r.model}/{r.label}") for r, latency_ms, gap in points],
        "Latency against numeric gap per (model, backend, precision)",
        ("latency p50 (ms)", f"worst accumulated gap, {metrics} (snr: lowest, dB; exact = 300)"),
    )
    return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def format_table(rows: list[RunRow]) -> str:
    records = [dataclasses.asdict(r) for r in rows]
    cols = TABLE_COLUMNS
    widths = {c: max(len(c), *(len(_fmt(r[c])) for r in records)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(_fmt(r[c]).ljust(widths[c]) for c in cols) for r in records]
    return "\n".join(lines)


def compare_runs(client: Any, runs: Sequence[Any], out_dir: Path) -> Comparison:
    """The comparison of MLflow runs (see compare_sources)."""
    with tempfile.TemporaryDirectory() as scratch:
        return compare_sources(mlflow_sources(client, runs, Path(scratch)), out_dir)


def compare_sources(sources: Sequence[RunSource], out_dir: Path) -> Comparison:
    """Write comparison_runs.csv, latency_vs_gap.svg and comparison_ops_<model>.csv to out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = run_rows(sources)
    runs_path = out_dir / "comparison_runs.csv"
    _write_csv(runs_path, [dataclasses.asdict(r) for r in rows], RUN_COLUMNS)
    plot = _plot(out_dir / "latency_vs_gap.svg", rows)
    per_op = []
    op_tables = []
    for model in sorted({r.model for r in rows}):
        ops = per_op_rows(sources, rows, model)
        if ops and sum(1 for r in rows if r.model == model) > 1:
            runtimes = sorted({r.runtime for r in rows if r.model == model})
            path = out_dir / f"comparison_ops_{model}.csv"
            _write_csv(path, [op.record(runtimes) for op in ops])
            per_op.append(path)
            op_tables.append(f"{format_op_rows(model, ops)}\n(all rows: {path})")
    text = format_table(rows) if rows else "(no runs)"
    text += "".join(f"\n{table}" for table in op_tables)
    kinds = sorted({r.runtime for r in rows})
    if len(kinds) > 1:
        text += (
            f"\nlatencies come from different runtimes ({', '.join(kinds)}): each run's p50 is "
            "shown with its runtime, and the slowest is named only among runs of one runtime"
        )
    return Comparison(runs_path, plot, tuple(per_op), text)
