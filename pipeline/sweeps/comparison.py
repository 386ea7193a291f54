"""Compare finished runs: a table and a latency-vs-gap plot per (model, backend, precision), and
per-op comparisons across backends for each model. Used by the sweep callback and pipeline.tools.compare.

Each table the comparison reads becomes typed rows first (`RunRow`, `TimedOp`, `OpGap`); each
table it writes is built from typed rows (`RunRow`, `OpComparison`).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from stages.analyze.config import UNITS_PER_MS
from stages.formats.etdump.records import TIMED_BLOCK


@dataclass(frozen=True)
class RunRow:
    """One run in comparison_runs.csv. max_gap is in gap_metric's unit (snr: dB)."""

    model: str
    backend: str
    precision: str
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
    "status",
    "verdict",
    "latency_p50_ms",
    "max_gap",
    "gap_metric",
    "first_divergence",
    "run_id",  # two runs of one config print alike but for this
)


class TimedOp(NamedTuple):
    """An events.csv row of a timed block that names ops, its p50 converted to ms."""

    op: str
    p50_ms: float


class OpGap(NamedTuple):
    """A compared numeric_gap.csv row: the op group and its local gap (accumulated if none)."""

    op: str
    metric: str
    value: float


@dataclass
class OpComparison:
    """One op (or fused op group) across the runs of one model."""

    op: str
    p50_ms: dict[str, float] = field(default_factory=dict)  # by run label
    local_gap: dict[str, float] = field(default_factory=dict)  # by run label
    metric: str = ""
    slowest: str | None = None
    least_accurate: str | None = None

    def record(self) -> dict[str, Any]:
        """The CSV row: `p50_ms[<label>]` and `local_<metric>[<label>]` columns per run."""
        row: dict[str, Any] = {"op": self.op}
        row |= {f"p50_ms[{label}]": value for label, value in self.p50_ms.items()}
        row |= {f"local_{self.metric}[{label}]": v for label, v in self.local_gap.items()}
        if self.slowest is not None:
            row["slowest"] = self.slowest
        if self.least_accurate is not None:
            row["least_accurate"] = self.least_accurate
        return row


@dataclass(frozen=True)
class Comparison:
    runs: Path
    plot: Path | None
    per_op: tuple[Path, ...]
    text: str


def _metric(run: Any, key: str) -> float | None:
    value = run.data.metrics.get(f"analyze.{key}")
    return float(value) if value is not None else None


def _local_or_download(client: Any, run: Any, name: str, into: Path) -> Path | None:
    """A run's analyze artifact: from its run dir when on this machine, else downloaded."""
    run_dir = run.data.tags.get("run_dir")
    if run_dir and (Path(run_dir) / name).is_file():
        return Path(run_dir) / name
    try:
        return Path(client.download_artifacts(run.info.run_id, f"analyze/{name}", str(into)))
    except Exception:  # a failed run has no analysis: it is listed, not compared per op
        return None


def _run_row(client: Any, run: Any, scratch: Path) -> RunRow:
    tags = run.data.tags
    summary: dict[str, Any] = {}
    summary_path = _local_or_download(client, run, "summary.json", scratch / run.info.run_id)
    if summary_path is not None:
        summary = json.loads(summary_path.read_text())
    divergence = summary.get("first_divergence")
    verdict = _metric(run, "verdict_pass")
    return RunRow(
        model=tags.get("model", ""),
        backend=tags.get("backend", ""),
        precision=tags.get("precision", ""),
        status=run.info.status,
        verdict="" if verdict is None else ("pass" if verdict == 1.0 else "fail"),
        latency_p50_ms=_metric(run, "latency_p50_ms"),
        latency_p90_ms=_metric(run, "latency_p90_ms"),
        max_gap=_metric(run, "max_gap"),
        gap_metric=str(summary.get("gap_metric", "")),
        higher_is_better=summary.get("higher_is_better"),
        delegated_time_share=_metric(run, "delegated_time_share"),
        delegated_op_ratio=_metric(run, "delegated_op_ratio"),
        partitions=_metric(run, "partitions"),
        first_divergence="+".join(divergence["op_names"]) if divergence else "",
        run_id=run.info.run_id,
        run_dir=tags.get("run_dir", ""),
    )


def run_rows(client: Any, runs: Sequence[Any], scratch: Path) -> list[RunRow]:
    rows = [_run_row(client, run, scratch) for run in runs]
    return sorted(rows, key=lambda r: (r.model, r.backend, r.precision))


def read_timed_ops(events_csv: Path) -> list[TimedOp]:
    with events_csv.open() as fh:
        return [
            # events.csv durations are in its rows' time_unit.
            TimedOp("+".join(names), float(e["p50"]) / UNITS_PER_MS[e.get("time_unit") or "ms"])
            for e in csv.DictReader(fh)
            if e["event_block_name"] == TIMED_BLOCK and (names := json.loads(e["op_names"] or "[]"))
        ]


def read_op_gaps(numeric_gap_csv: Path) -> list[OpGap]:
    gaps = []
    with numeric_gap_csv.open() as fh:
        for g in csv.DictReader(fh):
            names = json.loads(g.get("op_names") or "[]")
            if not names or g.get("status") != "ok":
                continue
            metric = g["gap_metric"]
            value = g.get(f"local_{metric}") or g.get(metric)
            gaps.append(OpGap("+".join(names), metric, float(value) if value else math.nan))
    return gaps


def _judge(entry: OpComparison, higher_is_better: bool | None) -> None:
    """Name the slowest run and, when gaps differ, the least accurate one."""
    if len(entry.p50_ms) > 1:
        entry.slowest = max(entry.p50_ms, key=entry.p50_ms.__getitem__)
    finite = {k: v for k, v in entry.local_gap.items() if not math.isnan(v)}
    if higher_is_better is not None and len(finite) > 1 and len(set(finite.values())) > 1:
        worst = min if higher_is_better else max
        entry.least_accurate = worst(finite, key=finite.__getitem__)


def per_op_rows(
    client: Any, runs: Sequence[Any], rows: list[RunRow], model: str, scratch: Path
) -> list[OpComparison]:
    """One row per op (or fused op group): p50 and local gap under each backend, and who loses."""
    by_run = {r.info.run_id: r for r in runs}
    table: dict[str, OpComparison] = {}
    directions = set()
    for row in rows:
        if row.model != model or row.status != "FINISHED":
            continue
        run = by_run[row.run_id]
        events = _local_or_download(client, run, "events.csv", scratch / run.info.run_id)
        gaps = _local_or_download(client, run, "numeric_gap.csv", scratch / run.info.run_id)
        for timed in read_timed_ops(events) if events is not None else []:
            entry = table.setdefault(timed.op, OpComparison(timed.op))
            entry.p50_ms[row.label] = entry.p50_ms.get(row.label, 0.0) + timed.p50_ms
        for gap in read_op_gaps(gaps) if gaps is not None else []:
            entry = table.setdefault(gap.op, OpComparison(gap.op))
            entry.metric = gap.metric
            entry.local_gap[row.label] = gap.value
        directions.add(row.higher_is_better)
    # Runs compared on different metrics or directions name no least accurate backend.
    higher_is_better = directions.pop() if len(directions) == 1 else None
    for entry in table.values():
        _judge(entry, higher_is_better)
    return sorted(table.values(), key=lambda e: -max(e.p50_ms.values(), default=0.0))


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
    from stages.analyze.report.plots import plot_points
    from stages.analyze.report.svg_charts import Point

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
    """Write comparison_runs.csv, latency_vs_gap.svg and comparison_ops_<model>.csv to out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        rows = run_rows(client, runs, Path(scratch))
        runs_path = out_dir / "comparison_runs.csv"
        _write_csv(runs_path, [dataclasses.asdict(r) for r in rows], RUN_COLUMNS)
        plot = _plot(out_dir / "latency_vs_gap.svg", rows)
        per_op = []
        for model in sorted({r.model for r in rows}):
            ops = per_op_rows(client, runs, rows, model, Path(scratch))
            if ops and sum(1 for r in rows if r.model == model) > 1:
                path = out_dir / f"comparison_ops_{model}.csv"
                _write_csv(path, [op.record() for op in ops])
                per_op.append(path)
    return Comparison(runs_path, plot, tuple(per_op), format_table(rows) if rows else "(no runs)")
