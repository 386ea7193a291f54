"""The analysis of a long run in memory that does not grow with its iterations, and the same
outputs as the in-memory path for runs of usual length."""

from __future__ import annotations

import csv
import dataclasses
import json
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stages.analyze.load.loading as loading
from stages.analyze.config import AnalyzeConfig
from stages.analyze.link.event_table import build_event_rows
from stages.analyze.link.linking import NS_PER_MS, ProgramIndex, identifier_of
from stages.analyze.stage import AnalyzeOptionError, run_analyze
from stages.formats.etdump import ETDumpData, read_etdump, streaming, write_etdump
from stages.formats.etdump.records import STAMP_EVENTS, TIMED_BLOCK
from stages.formats.etdump.streaming import open_etdump
from stages.handover.etrecord import load_etrecord
from tests.helpers.analyze_runs import RunTiny, read_summary

ITERATIONS = 12
OUTPUTS = (
    "events.csv",
    "numeric_gap.csv",
    "trace.json",
    "explorer_latency.json",
    "explorer_placement.json",
    "top_ops_p50.svg",
)


@pytest.fixture(scope="module")
def run_dir(run_tiny: RunTiny) -> Path:
    return run_tiny(  # exactly ITERATIONS timed blocks: no time budget
        "bounded-vit-xnnpack",
        "vit",
        "backend=xnnpack",
        f"runtime.iterations={ITERATIONS}",
        "runtime.max_time_s=null",
    )


def _repeated(dump: ETDumpData, times: int) -> ETDumpData:
    """The run's timed blocks `times` over, in place (same program, same latency values)."""
    timed = [b for b in dump.run_data if b.name == TIMED_BLOCK]
    first = dump.run_data.index(timed[0])
    rest = [b for b in dump.run_data[first:] if b.name != TIMED_BLOCK]
    return dataclasses.replace(dump, run_data=[*dump.run_data[:first], *(timed * times), *rest])


def _held_by_open(path: Path) -> int:
    """Bytes of Python objects an opened (and fully read) ETDump holds: tracemalloc, no clock."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        dump = open_etdump(path)
        assert sum(1 for b in dump.run_data for _ in b.events) > 0
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_state_of_the_analysis_does_not_grow_with_iterations(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten times the iterations: the latency state per row is the same size (a sketch of the
    same values), the opened ETDump holds a few bytes per block and none per event (past the
    events it keeps decoded, KEEP_EVENTS: none here, so these small files take that path), and
    trace.json shows the first `trace_iterations` blocks and says so."""
    monkeypatch.setattr(streaming, "KEEP_EVENTS", 0)
    index = ProgramIndex.from_etrecord(load_etrecord(run_dir / "etrecord.zip"))
    dump = read_etdump(run_dir / "etdump.etdp")
    paths, states, counts, held, events = {}, {}, {}, {}, {}
    for times in (1, 10):
        paths[times] = tmp_path / f"etdump_x{times}.etdp"
        write_etdump(paths[times], _repeated(dump, times))
        rows = build_event_rows(open_etdump(paths[times]), index, None, exact_samples=4)
        states[times] = [r.latencies.state_size() for r in rows]
        counts[times] = [r.count for r in rows]
        held[times] = _held_by_open(paths[times])
        events[times] = sum(len(b.events) for b in read_etdump(paths[times]).run_data)
    timed = [c1 for c1 in counts[1] if c1 == ITERATIONS]
    assert timed and [c10 for c10 in counts[10] if c10 == 10 * ITERATIONS] == [
        10 * c for c in timed
    ]
    assert states[10] == states[1]  # same values, ten times as many: not one number more
    per_event = (held[10] - held[1]) / (events[10] - events[1])
    assert per_event < 16, f"{per_event:.1f} bytes held per event"

    out = tmp_path / "out"
    out.mkdir()
    cfg = AnalyzeConfig(latency_exact_samples=4, trace_iterations=5)
    run_analyze(cfg, paths[10], run_dir / "debug.bin", run_dir / "etrecord.zip", out)
    trace = json.loads((out / "trace.json").read_text())
    shown = {
        e["args"]["block_index"]
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["cat"] == TIMED_BLOCK
    }
    assert len(shown) == 5
    warnings = read_summary(out)["warnings"]
    assert any(f"first 5 of {10 * ITERATIONS} 'Execute' blocks" in w for w in warnings)


def _old_stats(dump: ETDumpData, index: ProgramIndex) -> list[dict[str, float]]:
    """Per event row, the statistics the in-memory path computed: NumPy over every duration."""
    durations: dict[tuple[Any, ...], list[float]] = {}
    for block in dump.run_data:
        seen: dict[tuple[Any, ...], int] = {}
        for event in block.events:
            pe = event.profile_event
            if pe is None or pe.name in STAMP_EVENTS:
                continue
            ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
            base = (block.name, pe.name, pe.instruction_id, ident)
            seen[base] = seen.get(base, 0) + 1
            ticks = index.delegate_ticks_per_ms if ident is not None else NS_PER_MS
            key = (*base, seen[base])
            durations.setdefault(key, []).append((pe.end_time - pe.start_time) / ticks)
    return [
        {
            "p10": float(np.percentile(v, 10)),
            "p50": float(np.percentile(v, 50)),
            "p90": float(np.percentile(v, 90)),
            "avg": float(np.asarray(v).mean()),
            "min": float(np.min(v)),
            "max": float(np.max(v)),
        }
        for v in durations.values()
    ]


def test_outputs_equal_the_in_memory_path(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of usual length: every output file is byte for byte what the ETDump read at once
    (lists of events) gives, and the latency columns are NumPy's over every duration."""
    args = (run_dir / "etdump.etdp", run_dir / "debug.bin", run_dir / "etrecord.zip")
    streamed, in_memory = tmp_path / "streamed", tmp_path / "in_memory"
    streamed.mkdir()
    in_memory.mkdir()
    run_analyze(AnalyzeConfig(), *args, streamed)
    with monkeypatch.context() as patch:
        patch.setattr(loading, "open_etdump", read_etdump)
        run_analyze(AnalyzeConfig(), *args, in_memory)
    for name in OUTPUTS:
        assert (streamed / name).read_bytes() == (in_memory / name).read_bytes(), name
    summaries = [read_summary(d) for d in (streamed, in_memory)]
    for summary in summaries:
        summary.pop("seconds")
        summary.pop("artifacts")
    assert summaries[0] == summaries[1]

    index = ProgramIndex.from_etrecord(load_etrecord(run_dir / "etrecord.zip"))
    with (streamed / "events.csv").open() as fh:
        written = [{k: float(row[k]) for k in ("p10", "p50", "p90", "avg", "min", "max")}
                   for row in csv.DictReader(fh)]  # fmt: skip
    assert written == _old_stats(read_etdump(run_dir / "etdump.etdp"), index)


@pytest.mark.parametrize(
    "option", [{"latency_exact_samples": -1}, {"trace_iterations": -2}], ids=str
)
def test_negative_bounds_are_refused_naming_the_option(
    run_dir: Path, tmp_path: Path, option: dict[str, int]
) -> None:
    name = next(iter(option))
    with pytest.raises(AnalyzeOptionError, match=f"analyze.{name}="):
        run_analyze(AnalyzeConfig(**option), run_dir / "etdump.etdp", None, None, tmp_path)
