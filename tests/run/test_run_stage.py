"""The run stage on tiny lowered programs: events, identifiers, metadata, honest timings."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from omegaconf import DictConfig

from pipeline.runner import run_pipeline
from stages.backends.qnn import QnnBackend
from stages.formats.etdump import read_etdump, tensor_from_buffer
from stages.handover.etrecord import load_etrecord
from stages.run.stage import CAPTURE_BLOCK, TIMED_BLOCK


@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])
def test_every_delegate_kernel_event_carries_a_registered_identifier(
    backend: str, tiny_cfg: Callable[..., DictConfig]
) -> None:
    cfg = tiny_cfg(
        "vit",
        f"backend={backend}",
        "stages=[export,lower,run]",
        "runtime.iterations=3",
        "tracking=none",
    )
    result = run_pipeline(cfg, print_summary=False)
    record = load_etrecord(result.run_dir / "etrecord.zip")
    registered = {i for m in record.delegate_maps for i in m.debug_handle_map}
    dump = read_etdump(result.run_dir / "etdump.etdp")
    timed = [r for r in dump.run_data if r.name == TIMED_BLOCK]
    assert len(timed) == 3
    kernels = [
        e.profile_event
        for r in timed
        for e in r.events
        if e.profile_event
        and (e.profile_event.delegate_debug_id_int >= 0 or e.profile_event.delegate_debug_id_str)
    ]
    assert kernels
    identifiers = {
        k.delegate_debug_id_int if k.delegate_debug_id_int >= 0 else k.delegate_debug_id_str
        for k in kernels
    }
    assert identifiers == registered  # every kernel mapped, every mapped kernel ran
    if backend == "qnn":
        parsed = [QnnBackend.parse_delegate_metadata(k.delegate_debug_metadata) for k in kernels]
        assert all(
            p["cycles"] == k.end_time - k.start_time for p, k in zip(parsed, kernels, strict=True)
        )
    # Timed blocks capture no tensors; the capture block does, with every kernel's output.
    assert not any(e.debug_event for r in timed for e in r.events)
    capture = [r for r in dump.run_data if r.name == CAPTURE_BLOCK]
    buffer = (result.run_dir / "debug.bin").read_bytes()
    debug = [e.debug_event for r in capture for e in r.events if e.debug_event]
    delegate_debug = {
        d.delegate_debug_id_int if d.delegate_debug_id_int >= 0 else d.delegate_debug_id_str
        for d in debug
        if d.delegate_debug_id_int >= 0 or d.delegate_debug_id_str
    }
    assert delegate_debug == registered
    assert all(
        tensor_from_buffer(buffer, d.debug_entry.tensor).numel()
        for d in debug
        if d.debug_entry and d.debug_entry.tensor
    )
    assert result.artifacts("run").metrics["latency_min_ms"] > 0


def test_operator_events_are_named_like_executorch(tiny_cfg: Callable[..., DictConfig]) -> None:
    cfg = tiny_cfg(
        "topk_model",
        "backend=portable",
        "stages=[export,lower,run]",
        "runtime.iterations=1",
        "tracking=none",
    )
    result = run_pipeline(cfg, print_summary=False)
    record = load_etrecord(result.run_dir / "etrecord.zip")
    handles_by_instruction = record.lowering_info["instruction_debug_handles"]
    (timed,) = [
        r for r in read_etdump(result.run_dir / "etdump.etdp").run_data if r.name == TIMED_BLOCK
    ]
    names = [e.profile_event.name for e in timed.events if e.profile_event]
    assert "native_call_topk.out" in names and names[0] == "native_call_linear.out"
    ops = [
        e.profile_event
        for e in timed.events
        if e.profile_event and e.profile_event.name.startswith("native_call_")
    ]
    assert all(str(p.instruction_id) in handles_by_instruction for p in ops)
