"""Per-op rows keyed by the exported program's ops: different fusions of the same ops line up,
container events are not counted twice, and runtimes of different kinds are never ranked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.sweeps.op_alignment import RunOps, align, read_op_gaps, read_timed_ops
from stages.analyze.link.event_table import write_csv

NAMES = {1: "linear", 2: "relu", 3: "linear_1", 4: "relu_1", 5: "add", 6: "linear_2"}


def _run(root: Path, label: str, runtime: str, kernels: list[tuple[list[int], float]]) -> RunOps:
    """A run dir whose kernels cover these handle sets with these p50s (ms), and one compared
    output per kernel with a local SNR of 50 + its first handle."""
    root.mkdir(parents=True)
    events = [
        {
            "event_block_name": "Execute",
            "event_name": f"k{i}",
            "op_names": [NAMES[h] for h in handles],
            "debug_handles": handles,
            "p50": p50,
            "time_unit": "ms",
        }
        for i, (handles, p50) in enumerate(kernels)
    ]
    write_csv(root / "events.csv", tuple(events[0]), events)
    gaps = [
        {
            "op_names": [NAMES[h] for h in handles],
            "debug_handles": handles,
            "status": "ok",
            "gap_metric": "snr",
            "local_snr": 50.0 + handles[0],
        }
        for handles, _ in kernels
        if len(handles) < 6  # a partition-level call is timed, not compared, here
    ]
    columns = ("op_names", "debug_handles", "status", "gap_metric", "local_snr")
    write_csv(root / "numeric_gap.csv", columns, gaps)
    return RunOps(
        label,
        runtime,
        read_timed_ops(root / "events.csv"),
        read_op_gaps(root / "numeric_gap.csv"),
        higher_is_better=True,
    )


def test_two_fusions_of_the_same_ops_line_up_on_the_coarser_group(tmp_path: Path) -> None:
    fused = _run(
        tmp_path / "a", "xnnpack-fp32", "emulated", [([1, 2], 1.0), ([3, 4, 5], 2.0), ([6], 0.5)]
    )
    split = _run(
        tmp_path / "b",
        "npu-fp16",
        "emulated",
        [([1, 2], 3.0), ([3, 4], 1.0), ([5], 0.25), ([6], 0.1)],
    )
    rows = {row.op: row for row in align([fused, split])}
    assert set(rows) == {"linear+relu", "linear_1+relu_1+add", "linear_2"}
    middle = rows["linear_1+relu_1+add"]
    assert middle.keys == (3, 4, 5)
    assert middle.p50_ms == {"xnnpack-fp32": 2.0, "npu-fp16": pytest.approx(1.25)}
    assert middle.slowest == {"emulated": "xnnpack-fp32"}
    # The group's gap under each run: its worst compared output inside the group.
    assert middle.local_gap == {"xnnpack-fp32": 53.0, "npu-fp16": 53.0}
    assert rows["linear+relu"].slowest == {"emulated": "npu-fp16"}
    record = rows["linear+relu"].record(["emulated"])
    assert record["p50_ms[npu-fp16 @ emulated]"] == 3.0 and record["slowest"] == "npu-fp16"


def test_a_partition_level_run_joins_rows_and_is_never_ranked_against_emulated(
    tmp_path: Path,
) -> None:
    emulated = _run(
        tmp_path / "a", "xnnpack-fp32", "emulated", [([1, 2], 1.0), ([3, 4, 5], 2.0), ([6], 0.5)]
    )
    # ExecuTorch's delegate call spans the partition; its kernels carry no handles.
    real = _run(
        tmp_path / "b", "executorch_xnnpack-fp32", "executorch", [([1, 2, 3, 4, 5, 6], 0.01)]
    )
    (row,) = align([emulated, real])
    assert row.keys == (1, 2, 3, 4, 5, 6)
    assert row.p50_ms == {"xnnpack-fp32": 3.5, "executorch_xnnpack-fp32": 0.01}
    assert row.slowest == {}  # one run per runtime kind: nothing to rank
    record = row.record(["emulated", "executorch"])
    assert "slowest" not in record
    assert record["slowest[emulated]"] == "" and record["slowest[executorch]"] == ""
    assert record["p50_ms[executorch_xnnpack-fp32 @ executorch]"] == 0.01


def test_a_container_event_is_not_counted_beside_its_kernels(tmp_path: Path) -> None:
    run = _run(
        tmp_path / "a",
        "xnnpack-fp32",
        "emulated",
        [([1, 2, 3, 4, 5, 6], 9.0), ([1, 2], 1.0), ([3, 4, 5], 2.0), ([6], 0.5)],
    )
    rows = {row.op: row.p50_ms["xnnpack-fp32"] for row in align([run])}
    assert rows == {"linear+relu": 1.0, "linear_1+relu_1+add": 2.0, "linear_2": 0.5}


def test_a_large_partition_row_over_csvs_field_limit_is_kept(tmp_path: Path) -> None:
    """A whole partition's row carries every op's stack trace: a field over csv's 131072
    characters is read (the sweep's per-op comparison lost it), and the limit is put back."""
    import csv

    trace = "File model.py, line 1, in forward\n" * 8_000  # ~270 000 characters
    assert len(trace) > 131_072
    handles = list(range(1, 7))
    names = [NAMES[h] for h in handles]
    event = {"event_block_name": "Execute", "event_name": "partition", "op_names": names}
    event |= {"debug_handles": handles, "p50": 2.0, "time_unit": "ms", "stack_traces": trace}
    write_csv(tmp_path / "events.csv", tuple(event), [event])
    gap = {"op_names": names, "debug_handles": handles, "status": "ok", "gap_metric": "snr"}
    gap |= {"local_snr": 41.0, "stack_traces": trace}
    write_csv(tmp_path / "numeric_gap.csv", tuple(gap), [gap])
    before = csv.field_size_limit()
    (timed,) = read_timed_ops(tmp_path / "events.csv")
    (compared,) = read_op_gaps(tmp_path / "numeric_gap.csv")
    assert timed.keys == tuple(handles) and timed.p50_ms == 2.0
    assert compared.keys == tuple(handles) and compared.value == 41.0
    assert csv.field_size_limit() == before == 131_072
