"""ETDump writer/reader: round trips, ExecuTorch's own files, malformed input."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.formats.etdump import (
    AllocationEvent,
    DebugBufferWriter,
    DebugEvent,
    ETDumpData,
    ETDumpError,
    Event,
    ProfileEvent,
    RunData,
    TensorRecord,
    ValueRecord,
    ValueType,
    read_debug_buffer,
    read_etdump,
    read_etdump_bytes,
    tensor_from_buffer,
    write_etdump_bytes,
)
from tests.helpers.executorch_fixtures import executorch_fixtures

i32 = st.integers(-(2**31), 2**31 - 1)
u64 = st.integers(0, 2**64 - 1)
text = st.text(max_size=12)
tensors = st.builds(
    TensorRecord,
    scalar_type=st.sampled_from([0, 1, 3, 4, 5, 6, 7, 11]),
    sizes=st.lists(st.integers(0, 2**40), max_size=4).map(tuple),
    strides=st.lists(st.integers(0, 2**40), max_size=4).map(tuple),
    offset=st.integers(0, 2**62),
)
# Records are NamedTuples with defaults, which st.builds() would fill with random values too; map
# from the one field each variant sets so the others keep their defaults.
values = st.one_of(
    tensors.map(lambda t: ValueRecord(val=ValueType.TENSOR, tensor=t)),
    st.lists(tensors, max_size=3).map(
        lambda ts: ValueRecord(val=ValueType.TENSOR_LIST, tensor_list=tuple(ts))
    ),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: ValueRecord(val=ValueType.INT, int_value=i)),
    st.booleans().map(lambda b: ValueRecord(val=ValueType.BOOL, bool_value=b)),
    st.floats(allow_nan=False).map(lambda d: ValueRecord(val=ValueType.DOUBLE, double_value=d)),
)
events = st.one_of(
    st.builds(ProfileEvent, text, i32, i32, i32, text, st.binary(max_size=16), u64, u64).map(
        lambda p: Event(profile_event=p)
    ),
    st.builds(AllocationEvent, i32, u64).map(lambda a: Event(allocation_event=a)),
    st.builds(DebugEvent, u64, i32, st.none() | values, i32, text, text).map(
        lambda d: Event(debug_event=d)
    ),
)
dumps = st.builds(
    ETDumpData,
    version=st.integers(0, 2**32 - 1),
    run_data=st.lists(
        st.builds(
            RunData,
            name=text,
            bundled_input_index=i32,
            allocators=st.lists(text, max_size=2),
            events=st.lists(events, max_size=6),
        ),
        max_size=3,
    ),
)


@settings(max_examples=150, deadline=None)
@given(dumps)
def test_round_trip_field_for_field(dump: ETDumpData) -> None:
    data = write_etdump_bytes(dump)
    assert data[8:12] == b"ED00" and struct.unpack_from("<I", data)[0] == len(data) - 4
    assert read_etdump_bytes(data) == dump


def _small_dump() -> bytes:
    buffer = DebugBufferWriter()
    tensor = buffer.append(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    evs = [
        Event(profile_event=ProfileEvent("native_call_add.out", 0, 3, -1, "", b"", 10, 20)),
        Event(
            profile_event=ProfileEvent("q::Conv2d", 0, 4, -1, "fused_op_1_2", b"\x01\x02", 30, 40)
        ),
        Event(allocation_event=AllocationEvent(0, 1024)),
        Event(
            debug_event=DebugEvent(
                0, 3, ValueRecord(val=ValueType.TENSOR, tensor=tensor), -1, "", ""
            )
        ),
    ]
    return write_etdump_bytes(ETDumpData(0, [RunData("Execute", -1, ["constants"], evs)]))


def test_fuzzed_and_truncated_etdumps_only_raise_etdump_error() -> None:
    rng = random.Random(1234)
    seeds = [_small_dump(), (executorch_fixtures() / "etdump_1run.etdp").read_bytes()[:4096]]
    parsed = failed = 0
    for i in range(10_000):
        data = bytearray(seeds[i % 2] if i % 10 else seeds[1])
        mode = i % 4
        if mode == 0:  # truncate
            data = data[: rng.randrange(len(data))]
        elif mode == 1:  # flip bytes
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif mode == 2:  # overwrite a 32-bit word with a hostile offset/length
            pos = rng.randrange(0, len(data) - 4)
            data[pos : pos + 4] = struct.pack(
                "<I", rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, rng.randrange(2**32)])
            )
        else:  # random bytes with a valid header
            data = bytearray(
                struct.pack("<I", 200)
                + b"\0\0\0\0ED00"
                + bytes(rng.randrange(256) for _ in range(192))
            )
        try:
            read_etdump_bytes(bytes(data), f"fuzz#{i}")
            parsed += 1
        except ETDumpError as exc:
            assert f"fuzz#{i}" in str(exc)
            failed += 1
    assert parsed + failed == 10_000 and failed > 1_000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"\x10\x00\x00\x00\x00\x00\x00\x00XXXX" + b"\0" * 8, "not 'ED00'"),
        (None, "truncated"),
    ],
)
def test_malformed_inputs_name_the_file(tmp_path: Path, data: bytes | None, message: str) -> None:
    path = tmp_path / "bad.etdp"
    path.write_bytes(data if data is not None else _small_dump()[:-10])
    with pytest.raises(ETDumpError, match=message) as info:
        read_etdump(path)
    assert str(path) in str(info.value)


def test_debug_buffer_too_short_is_an_etdump_error() -> None:
    record = TensorRecord(6, (1000,), (1,), 64)
    with pytest.raises(ETDumpError, match="needs 4000 bytes but the buffer has 100"):
        tensor_from_buffer(b"\0" * 100, record)


def test_reads_etdumps_written_by_executorch() -> None:
    dump = read_etdump(executorch_fixtures() / "etdump_1run.etdp")
    assert [r.name for r in dump.run_data] == ["Default", "Execute"]
    profile = [e.profile_event for r in dump.run_data for e in r.events if e.profile_event]
    names = {p.name for p in profile}
    assert "DELEGATE_CALL" in names and any(n.startswith("native_call_") for n in names)
    assert all(p.end_time >= p.start_time for p in profile)
    delegated = [p for p in profile if p.delegate_debug_id_int >= 0 or p.delegate_debug_id_str]
    assert delegated  # XNNPACK kernel events inside DELEGATE_CALL

    debug = read_etdump(executorch_fixtures() / "etdump_1run_debug.etdp")
    buffer = (executorch_fixtures() / "debug_buffer_1run.bin").read_bytes()
    debug_events = [e.debug_event for r in debug.run_data for e in r.events if e.debug_event]
    tensors = [d.debug_entry.tensor for d in debug_events if d.debug_entry and d.debug_entry.tensor]
    assert tensors
    for record in tensors:
        value = tensor_from_buffer(buffer, record)
        assert tuple(value.shape) == record.sizes and torch.isfinite(value).all()


def test_debug_buffer_keeps_scalars_and_empty_tensors(tmp_path: Path) -> None:
    writer = DebugBufferWriter()
    values = [torch.tensor(3.5), torch.tensor(True), torch.zeros(0, 4), torch.arange(5)[::2]]
    records = [writer.append(v) for v in values]
    writer.write(tmp_path / "debug.bin")
    buffer = (tmp_path / "debug.bin").read_bytes()
    for value, record in zip(values, records, strict=True):
        assert torch.equal(tensor_from_buffer(buffer, record), value.contiguous())


def test_logged_tensors_are_views_of_a_read_debug_buffer(tmp_path: Path) -> None:
    """read_debug_buffer's payload is writable, so decoding shares its bytes instead of copying
    them; a read-only buffer (bytes) still decodes, into a copy."""
    writer = DebugBufferWriter()
    values = [torch.randn(4, 5), torch.arange(7, dtype=torch.int64), torch.randn(3).half()]
    records = [writer.append(v) for v in values]
    writer.write(tmp_path / "debug.bin")
    payload = read_debug_buffer(tmp_path / "debug.bin").payload
    assert not memoryview(payload).readonly
    start = torch.frombuffer(payload, dtype=torch.uint8).data_ptr()
    for value, record in zip(values, records, strict=True):
        shared = tensor_from_buffer(payload, record)
        assert torch.equal(shared, value)
        assert shared.data_ptr() == start + record.offset
        copied = tensor_from_buffer(bytes(payload), record)
        assert torch.equal(copied, value) and copied.data_ptr() != shared.data_ptr()
