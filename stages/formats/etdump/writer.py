"""Serialize ETDump records with the flatbuffers runtime (no flatc, no JSON), size-prefixed, 'ED00'.

Table slots follow ExecuTorch 1.5.1's etdump_schema_flatcc.fbs declaration order.
"""

from __future__ import annotations

from pathlib import Path

import flatbuffers

from stages.formats.etdump.records import (
    ETDUMP_FILE_IDENTIFIER,
    AllocationEvent,
    DebugEvent,
    ETDumpData,
    Event,
    ProfileEvent,
    RunData,
    TensorRecord,
    ValueRecord,
)
from stages.safe_io.atomic_write import write_bytes_atomic


def _string(b: flatbuffers.Builder, text: str | None) -> int:
    return b.CreateString(text) if text else 0


def _long_vector(b: flatbuffers.Builder, values: tuple[int, ...]) -> int:
    b.StartVector(8, len(values), 8)
    for v in reversed(values):
        b.PrependInt64(int(v))
    return int(b.EndVector())


def _offset_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return int(b.EndVector())


def _tensor(b: flatbuffers.Builder, t: TensorRecord) -> int:
    sizes, strides = _long_vector(b, t.sizes), _long_vector(b, t.strides)
    b.StartObject(4)
    b.PrependInt8Slot(0, t.scalar_type, 0)
    b.PrependUOffsetTRelativeSlot(1, sizes, 0)
    b.PrependUOffsetTRelativeSlot(2, strides, 0)
    b.PrependInt64Slot(3, t.offset, 0)
    return int(b.EndObject())


def _scalar_table(b: flatbuffers.Builder, kind: str, value: object) -> int:
    b.StartObject(1)
    if kind == "int":
        b.PrependInt64Slot(0, int(value), 0)  # type: ignore[call-overload]
    elif kind == "bool":
        b.PrependBoolSlot(0, bool(value), False)
    elif kind == "float":
        b.PrependFloat32Slot(0, float(value), 0.0)  # type: ignore[arg-type]
    else:
        b.PrependFloat64Slot(0, float(value), 0.0)  # type: ignore[arg-type]
    return int(b.EndObject())


def _value(b: flatbuffers.Builder, v: ValueRecord) -> int:
    tensor = _tensor(b, v.tensor) if v.tensor is not None else 0
    tensor_list = 0
    if v.tensor_list is not None:
        items = _offset_vector(b, [_tensor(b, t) for t in v.tensor_list])
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, items, 0)
        tensor_list = int(b.EndObject())
    int_v = _scalar_table(b, "int", v.int_value) if v.int_value is not None else 0
    float_v = _scalar_table(b, "float", v.float_value) if v.float_value is not None else 0
    double_v = _scalar_table(b, "double", v.double_value) if v.double_value is not None else 0
    bool_v = _scalar_table(b, "bool", v.bool_value) if v.bool_value is not None else 0
    output = _scalar_table(b, "bool", v.output) if v.output is not None else 0
    b.StartObject(8)
    b.PrependInt8Slot(0, int(v.val), 0)
    for slot, offset in (
        (1, tensor),
        (2, tensor_list),
        (3, int_v),
        (4, float_v),
        (5, double_v),
        (6, bool_v),
        (7, output),
    ):
        if offset:
            b.PrependUOffsetTRelativeSlot(slot, offset, 0)
    return int(b.EndObject())


def _profile(b: flatbuffers.Builder, e: ProfileEvent) -> int:
    name = _string(b, e.name)
    id_str = _string(b, e.delegate_debug_id_str)
    metadata = b.CreateByteVector(e.delegate_debug_metadata) if e.delegate_debug_metadata else 0
    b.StartObject(8)
    if name:
        b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependInt32Slot(1, e.chain_index, 0)
    b.PrependInt32Slot(2, e.instruction_id, -1)
    b.PrependInt32Slot(3, e.delegate_debug_id_int, -1)
    if id_str:
        b.PrependUOffsetTRelativeSlot(4, id_str, 0)
    if metadata:
        b.PrependUOffsetTRelativeSlot(5, metadata, 0)
    b.PrependUint64Slot(6, e.start_time, 0)
    b.PrependUint64Slot(7, e.end_time, 0)
    return int(b.EndObject())


def _allocation(b: flatbuffers.Builder, e: AllocationEvent) -> int:
    b.StartObject(2)
    b.PrependInt32Slot(0, e.allocator_id, 0)
    b.PrependUint64Slot(1, e.allocation_size, 0)
    return int(b.EndObject())


def _debug(b: flatbuffers.Builder, e: DebugEvent) -> int:
    entry = _value(b, e.debug_entry) if e.debug_entry is not None else 0
    id_str = _string(b, e.delegate_debug_id_str)
    name = _string(b, e.name)
    b.StartObject(6)
    b.PrependUint64Slot(0, e.chain_index, 0)
    b.PrependInt32Slot(1, e.instruction_id, -1)
    if entry:
        b.PrependUOffsetTRelativeSlot(2, entry, 0)
    b.PrependInt32Slot(3, e.delegate_debug_id_int, -1)
    if id_str:
        b.PrependUOffsetTRelativeSlot(4, id_str, 0)
    if name:
        b.PrependUOffsetTRelativeSlot(5, name, 0)
    return int(b.EndObject())


def _event(b: flatbuffers.Builder, e: Event) -> int:
    slot, offset = 0, 0
    if e.profile_event is not None:
        slot, offset = 0, _profile(b, e.profile_event)
    elif e.allocation_event is not None:
        slot, offset = 1, _allocation(b, e.allocation_event)
    elif e.debug_event is not None:
        slot, offset = 2, _debug(b, e.debug_event)
    b.StartObject(3)
    if offset:
        b.PrependUOffsetTRelativeSlot(slot, offset, 0)
    return int(b.EndObject())


def _run_data(b: flatbuffers.Builder, r: RunData) -> int:
    name = _string(b, r.name)
    allocators = []
    for allocator in r.allocators:
        text = _string(b, allocator)
        b.StartObject(1)
        if text:
            b.PrependUOffsetTRelativeSlot(0, text, 0)
        allocators.append(int(b.EndObject()))
    allocator_vec = _offset_vector(b, allocators) if allocators else 0
    events = _offset_vector(b, [_event(b, e) for e in r.events])
    b.StartObject(4)
    if name:
        b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependInt32Slot(1, r.bundled_input_index, -1)
    if allocator_vec:
        b.PrependUOffsetTRelativeSlot(2, allocator_vec, 0)
    b.PrependUOffsetTRelativeSlot(3, events, 0)
    return int(b.EndObject())


def write_etdump_bytes(etdump: ETDumpData) -> bytes:
    """The size-prefixed flatbuffer with file identifier 'ED00'."""
    b = flatbuffers.Builder(1024)
    runs = _offset_vector(b, [_run_data(b, r) for r in etdump.run_data])
    b.StartObject(2)
    b.PrependUint32Slot(0, etdump.version, 0)
    b.PrependUOffsetTRelativeSlot(1, runs, 0)
    root = b.EndObject()
    b.FinishSizePrefixed(root, file_identifier=ETDUMP_FILE_IDENTIFIER)
    return bytes(b.Output())


def write_etdump(path: Path, etdump: ETDumpData) -> int:
    """Write atomically; returns the number of bytes."""
    data = write_etdump_bytes(etdump)
    write_bytes_atomic(path, data)
    return len(data)
