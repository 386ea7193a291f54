from pathlib import Path

import pytest
import torch

from stages.backends.tracer_protocol import EventTracerDebugLogLevel, EventTracerProfilingLevel
from stages.formats.etdump import parse_debug_buffer, read_etdump, tensor_from_buffer
from stages.formats.etdump.records import DEBUG_BUFFER_EVENT, ValueType, read_stamp
from stages.run.event_tracer import EventFilter, EventTracer, EventTracerError


def test_operator_delegate_debug_and_allocation_events_reach_the_file(tmp_path: Path) -> None:
    tracer = EventTracer(debug_level=EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS)
    tracer.create_event_block("Execute")
    allocator = tracer.track_allocator("activations")
    tracer.track_allocation(allocator, 4096)
    entry = tracer.start_profiling("DELEGATE_CALL", 0, 0, 7)
    kernel = tracer.start_profiling_delegate("Fully Connected (NC, F32)", 3)
    tracer.end_profiling_delegate(kernel, b"meta")
    tracer.log_profiling_delegate(None, "fused_op_1_2", 100, 250, b"\x00\x01")
    tracer.log_intermediate_output_delegate(None, "fused_op_1_2", torch.ones(2, 2))
    tracer.end_profiling(entry)
    tracer.log_intermediate_output(5, 8, [torch.zeros(3), torch.ones(1)])
    tracer.end_profiling(tracer.start_profiling("native_call_add.out", 0, 6, 9))
    tracer.log_intermediate_output(6, 9, torch.ones(1))  # named after its operator
    tracer.write_etdump(tmp_path / "e.etdp", tmp_path / "d.bin")

    dump = read_etdump(tmp_path / "e.etdp")
    (block,) = dump.run_data  # the debug buffer's sha256 pairs the two files: a stamp, no block
    assert block.allocators[0] == "activations"
    assert block.allocators[1].startswith(f"{DEBUG_BUFFER_EVENT} sha256:")
    profile = [e.profile_event for e in block.events if e.profile_event]
    kernel_event, post_time, delegate_call, _ = profile
    assert (
        kernel_event.delegate_debug_id_int,
        kernel_event.instruction_id,
        kernel_event.delegate_debug_metadata,
    ) == (3, 7, b"meta")
    assert (post_time.delegate_debug_id_str, post_time.start_time, post_time.end_time) == (
        "fused_op_1_2",
        100,
        250,
    )
    assert delegate_call.name == "DELEGATE_CALL" and delegate_call.instruction_id == 7
    debug = [e.debug_event for e in block.events if e.debug_event]
    buffer = (tmp_path / "d.bin").read_bytes()
    assert torch.equal(tensor_from_buffer(buffer, debug[0].debug_entry.tensor), torch.ones(2, 2))
    assert [tuple(t.sizes) for t in debug[1].debug_entry.tensor_list] == [(3,), (1,)]
    assert [d.name for d in debug] == ["", "", "native_call_add.out"]
    assert len(buffer) < 320  # only the bytes used, 64-byte aligned, and the trailer
    parsed = parse_debug_buffer(buffer)
    assert read_stamp(dump, DEBUG_BUFFER_EVENT) == parsed.content_sha256()
    assert parsed.program_fingerprint is None  # no program logged its fingerprint here


def test_filter_drops_events_before_they_are_recorded(tmp_path: Path) -> None:
    tracer = EventTracer(
        event_filter=EventFilter(name_regex="linear", debug_handle_min=2, debug_handle_max=3)
    )
    tracer.create_event_block("Execute")
    for name, handle in [
        ("native_call_linear.out", 1),
        ("native_call_linear.out", 2),
        ("native_call_relu.out", 2),
    ]:
        tracer.end_profiling(tracer.start_profiling(name, 0, handle, handle))
    events = tracer.etdump().run_data[0].events
    assert [(e.profile_event.name, e.profile_event.instruction_id) for e in events] == [
        ("native_call_linear.out", 2)
    ]


def test_levels_gate_what_is_recorded() -> None:
    tracer = EventTracer(profiling_level=EventTracerProfilingLevel.NO_PROFILING)
    tracer.create_event_block("Execute")
    assert tracer.start_profiling("x", 0, 1, 1) is None
    tracer.log_intermediate_output(1, 1, torch.ones(1))  # debug level NO_LOGGING: ignored
    assert tracer.etdump().run_data[0].events == []


def test_misuse_raises_clear_errors() -> None:
    tracer = EventTracer()
    with pytest.raises(EventTracerError, match="create_event_block"):
        tracer.start_profiling("x")
    tracer.create_event_block("Execute")
    with pytest.raises(EventTracerError, match="needs a name or a delegate_debug_id"):
        tracer.start_profiling_delegate(None, None)
    with pytest.raises(EventTracerError, match="must be an int or a str"):
        tracer.start_profiling_delegate("k", 1.5)  # type: ignore[arg-type]
    with pytest.raises(EventTracerError, match="before start_time"):
        tracer.log_profiling_delegate("k", 1, 10, 5)
    with pytest.raises(EventTracerError, match="did not return"):
        tracer.end_profiling_delegate(["bogus"])
    with pytest.raises(EventTracerError, match="track_allocator"):
        tracer.track_allocation(3, 10)


def test_values_etdump_cannot_hold_are_skipped_with_the_reason(tmp_path: Path) -> None:
    """None (e.g. `_assert_tensor_metadata`), lists of non-tensors: recorded as skipped, never a
    crash; Python ints, bools and floats are logged as ETDump's Int, Bool and Double values."""
    tracer = EventTracer(debug_level=EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS)
    tracer.create_event_block("Execute")
    tracer.log_intermediate_output(1, 0, None)
    tracer.log_intermediate_output(2, 1, 7)
    tracer.log_intermediate_output(3, 2, True)
    tracer.log_intermediate_output(4, 3, 0.25)
    tracer.log_intermediate_output(5, 4, [torch.ones(1), None])
    tracer.log_intermediate_output_delegate(None, "kernel", None)
    for output in (torch.ones(2), None, 3):
        tracer.log_program_output(output)
    tracer.write_etdump(tmp_path / "e.etdp", tmp_path / "d.bin")

    skipped = [(s.debug_handle, s.instruction_id) for s in tracer.skipped_outputs]
    assert skipped == [(1, 0), (5, 4), (0, -1), (0, -1)]
    reasons = [s.reason for s in tracer.skipped_outputs]
    assert "NoneType" in reasons[0] and "ETDump lists hold tensors only" in reasons[1]
    assert reasons[2].startswith("delegate kernel") and reasons[3].startswith("program output")
    (block,) = [b for b in read_etdump(tmp_path / "e.etdp").run_data if b.name == "Execute"]
    values = [e.debug_event.debug_entry for e in block.events if e.debug_event]
    assert [(v.val, v.int_value, v.bool_value, v.double_value) for v in values[:3]] == [
        (ValueType.INT, 7, None, None),
        (ValueType.BOOL, None, True, None),
        (ValueType.DOUBLE, None, None, 0.25),
    ]
    outputs = values[3:]
    assert [v.val for v in outputs] == [ValueType.TENSOR, ValueType.INT]
    assert all(v.output for v in outputs)
