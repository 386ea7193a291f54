"""A long generation stays bounded (issue 37.3): which steps capture intermediate outputs is an
option, every step keeps its timed block, and only per-step records grow with the steps."""

from __future__ import annotations

import csv
from pathlib import Path

from stages.formats.etdump import read_etdump
from stages.formats.etdump.debug_buffer import read_debug_buffer
from stages.formats.etdump.records import CAPTURE_BLOCK, TIMED_BLOCK
from stages.handover.samples import load_samples
from tests.helpers.analyze_runs import RunTiny, read_summary

VOCAB = 64  # the small llm's: one step's logged next-token logits are VOCAB float32 values


def _blocks(run_dir: Path) -> tuple[list[int], list[int], int]:
    """(timed steps, captured steps, debug events in capture blocks)."""
    blocks = read_etdump(run_dir / "etdump.etdp").run_data
    timed = [b.bundled_input_index for b in blocks if b.name == TIMED_BLOCK]
    captures = [b for b in blocks if b.name == CAPTURE_BLOCK]
    logged = sum(1 for b in captures for e in b.events if e.debug_event is not None)
    return timed, [b.bundled_input_index for b in captures], logged


def test_only_per_step_records_grow_with_the_steps(run_generation: RunTiny) -> None:
    short, long = (
        run_generation(
            f"bounded-{n}", f"runtime.generate.new_tokens={n}", "runtime.generate.capture_first=1"
        )
        for n in (2, 8)
    )
    (timed_short, captured_short, logged_short) = _blocks(short)
    (timed_long, captured_long, logged_long) = _blocks(long)
    assert timed_short == [0, 1, 2] and timed_long == list(range(9))  # every step is timed
    assert captured_short == captured_long == [0]
    assert logged_short == logged_long  # the captured step's outputs, however long the run
    payload = [len(read_debug_buffer(r / "debug.bin").payload) for r in (short, long)]
    assert payload[1] - payload[0] == 6 * VOCAB * 4  # six more steps: their logits, nothing else
    assert [len(load_samples(r / "step_inputs.pt")) for r in (short, long)] == [1, 1]
    with (long / "generation_gaps.csv").open() as fh:
        assert {row["step"] for row in csv.DictReader(fh)} == {"0"}
    generation = read_summary(long)["generation"]
    assert len(generation["steps"]) == 9 and all(s["latency_ms"] > 0 for s in generation["steps"])
    assert generation["top1_agreement"] == 1.0  # logits of every step, captured or not


def test_every_kth_step_after_the_first_ones_captures(run_generation: RunTiny) -> None:
    run_dir = run_generation(
        "every-3",
        "runtime.generate.new_tokens=8",
        "runtime.generate.capture_first=2",
        "runtime.generate.capture_every=3",
    )
    _, captured, _ = _blocks(run_dir)
    assert captured == [0, 1, 3, 6]
    generation = read_summary(run_dir)["generation"]
    assert generation["captured_steps"] == [0, 1, 3, 6]
    assert sorted({r["step"] for r in generation["kv_cache"]}) == [0, 1, 3, 6]
