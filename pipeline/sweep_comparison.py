"""Compare finished runs: a table and a latency-vs-gap plot per (model, backend, precision), and
per-op comparisons across backends for each model. Used by the sweep callback and pipeline.compare.
"""

from __future__ import annotations

import csv
import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.formats.etdump.records import TIMED_BLOCK

RUN_COLUMNS = (
    "model",
    "backend",
    "precision",
    "status",
    "verdict",
    "latency_p50_ms",
    "latency_p90_ms",
    "max_gap",
    "delegated_time_share",
    "delegated_op_ratio",
    "partitions",
    "first_divergence",
    "run_id",
    "run_dir",
)


LOWER_IS_BETTER = {"mse", "mean_abs", "l1", "max_abs"}
TABLE_HIDDEN = {
    "latency_p90_ms",
    "delegated_time_share",
    "delegated_op_ratio",
    "partitions",
    "run_id",
    "run_dir",
}


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


def run_rows(client: Any, runs: Sequence[Any], scratch: Path) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        tags = run.data.tags
        first = ""
        summary_path = _local_or_download(client, run, "summary.json", scratch / run.info.run_id)
        if summary_path is not None:
            divergence = json.loads(summary_path.read_text()).get("first_divergence")
            first = "+".join(divergence["op_names"]) if divergence else ""
        verdict = _metric(run, "verdict_pass")
        rows.append(
            {
                "model": tags.get("model", ""),
                "backend": tags.get("backend", ""),
                "precision": tags.get("precision", ""),
                "status": run.info.status,
                "verdict": "" if verdict is None else ("pass" if verdict == 1.0 else "fail"),
                "latency_p50_ms": _metric(run, "latency_p50_ms"),
                "latency_p90_ms": _metric(run, "latency_p90_ms"),
                "max_gap": _metric(run, "max_gap"),
                "delegated_time_share": _metric(run, "delegated_time_share"),
                "delegated_op_ratio": _metric(run, "delegated_op_ratio"),
                "partitions": _metric(run, "partitions"),
                "first_divergence": first,
                "run_id": run.info.run_id,
                "run_dir": tags.get("run_dir", ""),
            }
        )
    rows.sort(key=lambda r: (r["model"], r["backend"], r["precision"]))
    return rows


def _label(row: dict[str, Any]) -> str:
    return f"{row['backend']}-{row['precision']}"


def per_op_rows(
    client: Any, runs: Sequence[Any], rows: list[dict[str, Any]], model: str, scratch: Path
) -> list[dict[str, Any]]:
    """One row per op (or fused op group): p50 and local gap under each backend, and who loses."""
    by_run = {r.info.run_id: r for r in runs}
    table: dict[str, dict[str, Any]] = {}
    labels = []
    for row in rows:
        if row["model"] != model or row["status"] != "FINISHED":
            continue
        run = by_run[row["run_id"]]
        label = _label(row)
        labels.append(label)
        events = _local_or_download(client, run, "events.csv", scratch / run.info.run_id)
        gaps = _local_or_download(client, run, "numeric_gap.csv", scratch / run.info.run_id)
        if events is not None:
            with events.open() as fh:
                for e in csv.DictReader(fh):
                    names = json.loads(e["op_names"] or "[]")
                    if e["event_block_name"] != TIMED_BLOCK or not names:
                        continue
                    key = "+".join(names)
                    entry = table.setdefault(key, {"op": key})
                    entry[f"p50_ms[{label}]"] = entry.get(f"p50_ms[{label}]", 0.0) + float(e["p50"])
        if gaps is not None:
            with gaps.open() as fh:
                for g in csv.DictReader(fh):
                    names = json.loads(g.get("op_names") or "[]")
                    if not names or g.get("status") != "ok":
                        continue
                    metric = g["gap_metric"]
                    value = g.get(f"local_{metric}") or g.get(metric)
                    entry = table.setdefault("+".join(names), {"op": "+".join(names)})
                    entry[f"local_{metric}[{label}]"] = float(value) if value else math.nan
    out = []
    for entry in table.values():
        times = {k[7:-1]: v for k, v in entry.items() if k.startswith("p50_ms[")}
        local = {k.split("[", 1)[1][:-1]: v for k, v in entry.items() if k.startswith("local_")}
        if len(times) > 1:
            entry["slowest"] = max(times, key=times.__getitem__)
        finite = {k: v for k, v in local.items() if not math.isnan(v)}
        if len(finite) > 1 and len(set(finite.values())) > 1:
            metric = next(k for k in entry if k.startswith("local_")).split("[")[0][6:]
            worst = max if metric in LOWER_IS_BETTER else min
            entry["least_accurate"] = worst(finite, key=finite.__getitem__)
        out.append(entry)
    out.sort(key=lambda e: -max([v for k, v in e.items() if k.startswith("p50_ms[")] or [0.0]))
    return out


def _write_csv(
    path: Path, rows: list[dict[str, Any]], columns: Sequence[str] | None = None
) -> None:
    from stages.analyze.event_table import write_csv

    write_csv(path, tuple(columns or dict.fromkeys(k for r in rows for k in r)), rows)


def _plot(path: Path, rows: list[dict[str, Any]]) -> Path | None:
    points = [r for r in rows if r["latency_p50_ms"] is not None and r["max_gap"] is not None]
    if not points:
        return None
    from stages.analyze.plots import plt, save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in points:
        ax.scatter(r["latency_p50_ms"], r["max_gap"], s=40)
        ax.annotate(
            f"{r['model']}/{_label(r)}",
            (r["latency_p50_ms"], r["max_gap"]),
            fontsize=8,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel("latency p50 (ms)")
    ax.set_ylabel("max gap (worst accumulated SNR, dB; exact = 300)")
    ax.set_title("Latency against numeric gap per (model, backend, precision)")
    save_figure(fig, path)
    return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def format_table(rows: list[dict[str, Any]]) -> str:
    cols = [c for c in RUN_COLUMNS if c not in TABLE_HIDDEN]
    widths = {c: max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(_fmt(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def compare_runs(client: Any, runs: Sequence[Any], out_dir: Path) -> Comparison:
    """Write comparison_runs.csv, latency_vs_gap.png and comparison_ops_<model>.csv to out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        rows = run_rows(client, runs, Path(scratch))
        runs_path = out_dir / "comparison_runs.csv"
        _write_csv(runs_path, rows, RUN_COLUMNS)
        plot = _plot(out_dir / "latency_vs_gap.png", rows)
        per_op = []
        for model in sorted({r["model"] for r in rows}):
            ops = per_op_rows(client, runs, rows, model, Path(scratch))
            if ops and sum(1 for r in rows if r["model"] == model) > 1:
                path = out_dir / f"comparison_ops_{model}.csv"
                _write_csv(path, ops)
                per_op.append(path)
    return Comparison(runs_path, plot, tuple(per_op), format_table(rows) if rows else "(no runs)")
