"""A generation as a run (issue 37): prefill + decode executions of one program, each its own
ETDump block, analysed per step; faults named with their step and op; clean runs pass."""

from __future__ import annotations

import pytest
import torch

from stages.formats.etdump import read_etdump
from stages.formats.etdump.records import CAPTURE_BLOCK, TIMED_BLOCK
from stages.handover.samples import load_samples
from tests.helpers.analyze_runs import RunTiny, read_summary

DECODE = "runtime.generate.new_tokens=4"


def test_prefill_and_decode_are_blocks_of_one_program(run_generation: RunTiny) -> None:
    run_dir = run_generation("fp32", DECODE)
    blocks = read_etdump(run_dir / "etdump.etdp").run_data
    timed = [b.bundled_input_index for b in blocks if b.name == TIMED_BLOCK]
    captured = [b.bundled_input_index for b in blocks if b.name == CAPTURE_BLOCK]
    assert timed == [0, 1, 2, 3, 4] and captured == [0, 1, 2, 3, 4]
    generation = read_summary(run_dir)["generation"]
    assert generation["prompt_tokens"] == 5 and generation["new_tokens"] == 4
    tokens = load_samples(run_dir / "run_outputs.pt")[0][0]
    assert tokens.shape == (1, 5)
    # The runtime's greedy tokens are the eager model's own greedy generation at fp32.
    assert [s["token"] for s in generation["steps"]] == tokens[0].tolist()
    assert generation["top1_agreement"] == 1.0 and generation["first_differing_token"] is None
    assert {s["kind"] for s in generation["steps"]} == {
        "prefill",
        *(f"decode {i}" for i in range(1, 5)),
    }
    assert (
        generation["latency"]["prefill_ms"] > 0 and generation["latency"]["decode_tokens_per_s"] > 0
    )


def _eager_greedy(run_dir, steps: int) -> list[int]:  # type: ignore[no-untyped-def]
    from stages.export.zoo.llm import build_llm

    torch.manual_seed(0)
    model = build_llm(
        vocab_size=64, dim=32, layers=2, heads=4, kv_heads=2, hidden=64, seq_len=16
    ).eval()
    tokens = load_samples(run_dir / "inputs.pt")[0][0]
    out = []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.nn.functional.pad(tokens, (0, 16 - tokens.shape[1])))
            token = int(logits[0, tokens.shape[1] - 1].argmax())
            out.append(token)
            tokens = torch.cat([tokens, torch.tensor([[token]])], dim=1)
    return out


def test_cached_generation_matches_the_uncached_model(run_generation: RunTiny) -> None:
    run_dir = run_generation("fp32", DECODE)
    generated = load_samples(run_dir / "run_outputs.pt")[0][0][0].tolist()
    assert generated == _eager_greedy(run_dir, 5)


@pytest.mark.parametrize(
    ("backend", "precision"),
    [
        ("xnnpack", "fp32"),
        ("xnnpack", "fp16"),
        ("xnnpack", "int8"),
        ("qnn", "int8"),
        ("portable", "fp32"),
    ],
)
def test_clean_generations_pass(run_generation: RunTiny, backend: str, precision: str) -> None:
    run_dir = run_generation(
        f"clean-{backend}-{precision}",
        DECODE,
        f"backend={backend}",
        f"backend.precision={precision}",
    )
    summary = read_summary(run_dir)
    generation = summary["generation"]
    assert summary["verdict"] == "pass", generation["first_divergence"]
    assert generation["first_divergence"] is None
    assert [s["status"] for s in generation["steps"]] == ["pass"] * 5
    assert len(generation["kv_cache"]) == 5 * 2  # every step, both layers
    if precision == "fp32":
        assert generation["top1_agreement"] == 1.0


@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])  # qnn holds the cache update
def test_a_decode_only_fault_is_named_with_its_step_and_op(
    run_generation: RunTiny, backend: str
) -> None:
    run_dir = run_generation(
        f"decode-fault-{backend}",
        DECODE,
        f"backend={backend}",
        "backend.fault.node=index_copy_2",  # layer 1's key cache update
        "backend.fault.kind=offset",
        "backend.fault.value=0.01",
        "backend.fault.from_step=2",
    )
    summary = read_summary(run_dir)
    generation = summary["generation"]
    first = generation["first_divergence"]
    assert summary["verdict"] == "fail"
    assert (first["step"], first["kind"], first["op_names"]) == (2, "decode 2", ["index_copy_2"])
    assert first["layer"] == "decoder.layers.1"
    assert summary["first_divergence"]["step"] == 2
    assert summary["first_divergence"]["fault_nodes"] == ["index_copy_2"]
    assert [s["status"] for s in generation["steps"][:2]] == ["pass", "pass"]
    # The error enters layer 1's key cache at step 2 and accumulates; layer 0's stays clean.
    k_snr = {(r["step"], r["layer"]): float(r["k_snr_db"]) for r in generation["kv_cache"]}
    assert k_snr[(2, "layers.1")] < k_snr[(1, "layers.1")] - 20  # the fault's first step
    assert k_snr[(4, "layers.1")] < k_snr[(2, "layers.1")]  # and it accumulates
    assert k_snr[(4, "layers.0")] > k_snr[(4, "layers.1")] + 20


def test_a_prefill_fault_is_named_at_step_0(run_generation: RunTiny) -> None:
    run_dir = run_generation(
        "prefill-fault", DECODE, "backend.fault.node=linear_4", "backend.fault.value=1.05"
    )
    summary = read_summary(run_dir)
    first = summary["generation"]["first_divergence"]
    assert summary["verdict"] == "fail"
    assert first["step"] == 0 and first["kind"] == "prefill"
    assert "linear_4" in first["op_names"] and first["layer"] == "decoder.layers.0"


def test_a_decode_only_fault_in_a_delegated_kernel_is_named_at_its_step(
    run_generation: RunTiny,
) -> None:
    run_dir = run_generation(
        "delegated-decode-fault",
        DECODE,
        "backend.fault.node=linear_4",  # layer 0's ffn w1, fused with silu by xnnpack
        "backend.fault.value=1.05",
        "backend.fault.from_step=3",
    )
    summary = read_summary(run_dir)
    first = summary["generation"]["first_divergence"]
    assert (first["step"], first["kind"], first["layer"]) == (3, "decode 3", "decoder.layers.0")
    assert "linear_4" in first["op_names"]
    assert [s["status"] for s in summary["generation"]["steps"][:3]] == ["pass"] * 3
    report = (run_dir / "report.html").read_text()
    assert "Generation (prefill and decode steps)" in report and "generation gap" in report
    assert "step 3 (decode 3)" in report
