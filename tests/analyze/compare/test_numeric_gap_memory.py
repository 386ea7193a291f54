"""The numeric gap holds only the few reference values still to be read, not the whole program's,
and releasing them changes no row, no cond record and no verdict input."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from stages.analyze.compare.comparators import build_comparators
from stages.analyze.compare.numeric_gap import numeric_gap_and_flow
from stages.analyze.compare.runtime_outputs import runtime_outputs
from stages.analyze.compare.sample_walk import WalkStats
from stages.analyze.link.linking import ProgramIndex
from stages.formats.etdump import read_debug_buffer, read_etdump
from stages.handover.etrecord import etrecord_program, load_etrecord
from tests.helpers.analyze_runs import RunTiny

# Models and settings covering the walk's cases: float rows with error budgets, several samples
# walked in step, cond branches taken differently per sample, index ops, int8 calibration.
CASES = {
    "vit_xnnpack": ("vit", "backend=xnnpack"),
    "vit_qnn_fp16_two_samples": ("vit", "backend=qnn", "inputs.count=2"),
    "cond_qnn_four_samples": ("cond_model", "backend=qnn", "inputs.count=4"),
    "topk_xnnpack_two_samples": ("topk_model", "backend=xnnpack", "inputs.count=2"),
    "llm_qnn_int8": ("llm", "backend=qnn", "backend.precision=int8"),
    "mobilenet_v2_qnn_fp16": ("mobilenet_v2", "backend=qnn"),
}
COMPARATORS = ["mse", "mean_abs", "l1", "snr", "cosine", "max_abs"]


def _walk(run_dir: Path, release_values: bool) -> tuple[str, WalkStats]:
    """Rows and cond records as JSON text (NaN-exact), and what the walk held at its peak."""
    record = load_etrecord(run_dir / "etrecord.zip")
    index = ProgramIndex.from_etrecord(record)
    buffer = read_debug_buffer(run_dir / "debug.bin").payload
    outputs = runtime_outputs(read_etdump(run_dir / "etdump.etdp"), buffer, index)
    stats = WalkStats()
    _, rows, records = numeric_gap_and_flow(
        outputs,
        etrecord_program(record),
        record.representative_inputs,
        build_comparators(COMPARATORS, None),
        precision=index.precision,
        floor_units=1.0,
        stats=stats,
        release_values=release_values,
    )
    plain: dict[str, Any] = {
        "rows": [asdict(r) for r in rows],
        "records": [r.record() for r in records],
    }
    return json.dumps(plain, default=str, sort_keys=True), stats


@pytest.mark.parametrize("case", sorted(CASES))
def test_releasing_reference_values_changes_nothing(run_tiny: RunTiny, case: str) -> None:
    model, *overrides = CASES[case]
    run_dir = run_tiny(f"gap_memory_{case}", model, *overrides)
    kept, kept_stats = _walk(run_dir, release_values=False)
    released, stats = _walk(run_dir, release_values=True)
    assert released == kept
    assert "local_rerun_failed" not in released  # no value was released before its last reader
    assert stats.peak_values < kept_stats.peak_values


def test_values_held_do_not_grow_with_depth(run_tiny: RunTiny) -> None:
    """Six blocks hold no more at once than two: memory follows the largest live activations,
    not their sum (which triples)."""
    held = {}
    for depth in (2, 6):
        run_dir = run_tiny(f"gap_memory_depth{depth}", "vit", f"model.kwargs.depth={depth}")
        held[depth] = (_walk(run_dir, True)[1], _walk(run_dir, False)[1])
    (shallow, shallow_all), (deep, deep_all) = held[2], held[6]
    assert deep_all.peak_bytes > 2.5 * shallow_all.peak_bytes
    assert deep.peak_values == shallow.peak_values
    assert deep.peak_bytes == shallow.peak_bytes
    assert deep.peak_bytes < deep_all.peak_bytes / 5
