"""Per-op rows across runs, keyed by the exported program's ops (debug handles), so different
fusions of the same ops line up: a row is the smallest set of ops every run's kernels fit in."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from stages.analyze.config import UNITS_PER_MS
from stages.formats.etdump.records import TIMED_BLOCK
from stages.safe_io.csv_fields import read_dict_rows

OpKey = int | str  # a debug handle; an op name where a table carries no handles


class TimedOp(NamedTuple):
    """A timed events.csv row that names ops: its ops (by handle) and its p50 in ms."""

    keys: tuple[OpKey, ...]
    names: tuple[str, ...]
    p50_ms: float

    @property
    def op(self) -> str:
        return "+".join(self.names)


class OpGap(NamedTuple):
    """A compared numeric_gap.csv row: its ops and its local gap (accumulated if none)."""

    keys: tuple[OpKey, ...]
    names: tuple[str, ...]
    metric: str
    value: float


def _keys(row: dict[str, str]) -> tuple[tuple[OpKey, ...], tuple[str, ...]]:
    names = tuple(str(n) for n in json.loads(row.get("op_names") or "[]"))
    handles = json.loads(row.get("debug_handles") or "[]")
    if handles and all(isinstance(h, int) for h in handles):
        return tuple(handles), names
    return names, names


def read_timed_ops(events_csv: Path) -> list[TimedOp]:
    """Rows of the timed block that name ops; durations from the row's own time unit to ms."""
    rows = [e for e in read_dict_rows(events_csv) if e["event_block_name"] == TIMED_BLOCK]
    timed = []
    for e in rows:
        keys, names = _keys(e)
        if keys:
            unit = UNITS_PER_MS[e.get("time_unit") or "ms"]
            timed.append(TimedOp(keys, names, float(e["p50"]) / unit))
    return timed


def read_op_gaps(numeric_gap_csv: Path) -> list[OpGap]:
    """Compared rows (status ok) with their local gap in the run's own metric."""
    gaps = []
    for g in read_dict_rows(numeric_gap_csv):  # a large partition's row: fields over 128 KiB
        keys, names = _keys(g)
        if not keys or g.get("status") != "ok":
            continue
        metric = g["gap_metric"]
        value = g.get(f"local_{metric}") or g.get(metric)
        gaps.append(OpGap(keys, names, metric, float(value) if value else math.nan))
    return gaps


def innermost(timed: Sequence[TimedOp]) -> list[TimedOp]:
    """Drop container events (a delegate call spanning kernels that are timed on their own), so
    a row never counts the same time twice."""
    sets = [frozenset(t.keys) for t in timed]
    return [t for t, s in zip(timed, sets, strict=True) if not any(o < s for o in sets)]


class _Groups:
    """Union-find over op keys: ops one kernel (or one compared output) covers stay together."""

    def __init__(self) -> None:
        self.parent: dict[OpKey, OpKey] = {}

    def find(self, key: OpKey) -> OpKey:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def join(self, keys: Iterable[OpKey]) -> None:
        keys = list(keys)
        first = self.find(keys[0])
        for other in keys[1:]:
            self.parent[self.find(other)] = first


@dataclass
class RunOps:
    """What one run contributes: its label, runtime kind, kernels and compared outputs."""

    label: str
    runtime: str
    timed: list[TimedOp]
    gaps: list[OpGap]
    higher_is_better: bool | None


@dataclass
class OpRow:
    """One group of the exported program's ops across the runs of one model."""

    keys: tuple[OpKey, ...]
    names: tuple[str, ...]
    p50_ms: dict[str, float] = field(default_factory=dict)  # by run label
    runtime: dict[str, str] = field(default_factory=dict)  # by run label
    local_gap: dict[str, float] = field(default_factory=dict)  # by run label
    metric: str = ""
    slowest: dict[str, str] = field(default_factory=dict)  # by runtime kind
    least_accurate: str | None = None

    @property
    def op(self) -> str:
        return "+".join(self.names)

    def record(self, runtimes: Sequence[str]) -> dict[str, Any]:
        """CSV row: p50 per run (its runtime in the column name), local gap per run, and the
        slowest run per runtime kind (never decided across kinds)."""
        row: dict[str, Any] = {"op": self.op, "debug_handles": list(self.keys)}
        row |= {f"p50_ms[{label} @ {self.runtime[label]}]": v for label, v in self.p50_ms.items()}
        row |= {f"local_{self.metric}[{label}]": v for label, v in self.local_gap.items()}
        if len(runtimes) == 1:
            row["slowest"] = self.slowest.get(runtimes[0], "")
        else:
            row |= {f"slowest[{kind}]": self.slowest.get(kind, "") for kind in runtimes}
        row["least_accurate"] = self.least_accurate or ""
        return row


def _group_of(groups: _Groups, keys: Sequence[OpKey]) -> OpKey:
    return groups.find(keys[0])


def align(runs: Sequence[RunOps]) -> list[OpRow]:
    """Rows of ops that every run's kernels and compared outputs fit in, with each run's p50
    (summed over its kernels in the row) and local gap (its worst output in the row)."""
    groups = _Groups()
    kernels = {run.label: innermost(run.timed) for run in runs}
    names: dict[OpKey, str] = {}
    for run in runs:
        covered: list[tuple[tuple[OpKey, ...], tuple[str, ...]]] = [
            *((k.keys, k.names) for k in kernels[run.label]),
            *((g.keys, g.names) for g in run.gaps),
        ]
        for keys, op_names in covered:
            groups.join(keys)
            if len(keys) == len(op_names):
                names.update(zip(keys, op_names, strict=True))
    members: dict[OpKey, list[OpKey]] = {}
    for key in groups.parent:
        members.setdefault(groups.find(key), []).append(key)
    rows: dict[OpKey, OpRow] = {}
    for root, group in members.items():
        ordered = tuple(sorted(group, key=_graph_order))
        rows[root] = OpRow(ordered, tuple(str(names.get(k, k)) for k in ordered))
    directions = {run.higher_is_better for run in runs if run.gaps}
    higher_is_better = directions.pop() if len(directions) == 1 else None
    for run in runs:
        for kernel in kernels[run.label]:
            row = rows[_group_of(groups, kernel.keys)]
            row.p50_ms[run.label] = row.p50_ms.get(run.label, 0.0) + kernel.p50_ms
            row.runtime[run.label] = run.runtime
        for gap in run.gaps:
            row = rows[_group_of(groups, gap.keys)]
            row.metric = gap.metric
            old = row.local_gap.get(run.label)
            row.local_gap[run.label] = gap.value if old is None else _worse(old, gap.value, run)
    for row in rows.values():
        _judge(row, higher_is_better)
    return sorted(rows.values(), key=lambda r: -max(r.p50_ms.values(), default=0.0))


def _graph_order(key: OpKey) -> tuple[int, int, str]:
    """Handles in graph order (they are numbered that way), then names."""
    return (0, key, "") if isinstance(key, int) else (1, 0, key)


def _worse(a: float, b: float, run: RunOps) -> float:
    if math.isnan(a) or math.isnan(b):
        return a if math.isnan(b) else b
    if run.higher_is_better is None:
        return b
    return min(a, b) if run.higher_is_better else max(a, b)


def _judge(row: OpRow, higher_is_better: bool | None) -> None:
    """The slowest run within each runtime kind; the least accurate when gaps differ."""
    for kind in set(row.runtime.values()):
        same = {k: v for k, v in row.p50_ms.items() if row.runtime[k] == kind}
        if len(same) > 1:
            row.slowest[kind] = max(same, key=same.__getitem__)
    finite = {k: v for k, v in row.local_gap.items() if not math.isnan(v)}
    if higher_is_better is not None and len(finite) > 1 and len(set(finite.values())) > 1:
        worst = min if higher_is_better else max
        row.least_accurate = worst(finite, key=finite.__getitem__)
