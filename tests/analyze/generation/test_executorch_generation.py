"""A generation on ExecuTorch's own runtime (issue 37.1): ExecuTorch's XNNPACK lowering of the
generation program, prefill and decode steps each an `Execute` block of its ETDump, the same
greedy tokens as the emulated runtime, and the same per-step analysis: a clean run passes every
step; a fault acting from decode step 2 on (a step gate in the shipped program) is named at that
step, op and layer, and shows in that layer's KV cache from that step on.

These are the module's two ExecuTorch lowerings (the clean and the faulted program)."""

from __future__ import annotations

import pytest

from stages.formats.etdump import read_etdump
from stages.formats.etdump.records import CAPTURE_BLOCK, TIMED_BLOCK
from stages.handover.samples import load_samples
from tests.helpers.analyze_runs import RunTiny, read_summary

pytest.importorskip("executorch", reason="pip install -e '.[executorch]'")
# ExecuTorch's lowering of the dynamic-shape program took ~2 min on the loaded shared machine.
pytestmark = [pytest.mark.executorch, pytest.mark.timeout(900)]

DECODE = "runtime.generate.new_tokens=4"
EXECUTORCH = "backend=executorch_xnnpack"
FAULT = [
    "backend.fault.node=index_copy_2",  # layer 1's key-cache update
    "backend.fault.kind=offset",
    "backend.fault.value=0.01",
    "backend.fault.from_step=2",
]


def test_executorch_generation_runs_and_is_analysed_per_step(run_generation: RunTiny) -> None:
    emulated = run_generation("fp32", DECODE)
    run_dir = run_generation("executorch", DECODE, EXECUTORCH)
    blocks = read_etdump(run_dir / "etdump.etdp").run_data
    assert [b.bundled_input_index for b in blocks if b.name == TIMED_BLOCK] == [0, 1, 2, 3, 4]
    assert [b.bundled_input_index for b in blocks if b.name == CAPTURE_BLOCK] == [0, 1, 2, 3, 4]
    tokens = [load_samples(r / "run_outputs.pt")[0][0].tolist() for r in (run_dir, emulated)]
    assert tokens[0] == tokens[1]
    summary = read_summary(run_dir)
    generation = summary["generation"]
    assert summary["verdict"] == "pass"
    assert generation["first_divergence"] is None and generation["top1_agreement"] == 1.0
    assert [s["status"] for s in generation["steps"]] == ["pass"] * 5
    assert all(s["logits_snr_db"] > 100 for s in generation["steps"])  # fp32 kernels
    kv = generation["kv_cache"]
    assert {(r["step"], r["layer"]) for r in kv} == {
        (s, f"layers.{i}") for s in range(5) for i in range(2)
    }
    assert min(min(r["k_snr_db"], r["v_snr_db"]) for r in kv) > 100
    latency = generation["latency"]
    assert latency["prefill_ms"] > 0 and latency["decode_tokens_per_s"] > 0
    assert (run_dir / "generation_gaps.csv").read_text().count("\n") > 5 * 10  # ops per step


def test_executorch_decode_fault_is_named_at_its_step(run_generation: RunTiny) -> None:
    run_dir = run_generation("executorch_fault", DECODE, EXECUTORCH, *FAULT)
    generation = read_summary(run_dir)["generation"]
    first = generation["first_divergence"]
    assert first is not None
    assert (first["step"], first["kind"]) == (2, "decode 2")
    assert "index_copy_2" in first["op_names"] and first["layer"] == "decoder.layers.1"
    assert [s["status"] for s in generation["steps"]][:2] == ["pass", "pass"]
    key = {(r["step"], r["layer"]): r["k_snr_db"] for r in generation["kv_cache"]}
    assert key[(1, "layers.1")] > 100 and key[(2, "layers.1")] < 60  # from step 2 on
    assert key[(4, "layers.0")] > 100  # the other layer's cache is untouched
