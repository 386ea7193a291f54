"""Read ETDumps (ours or ExecuTorch's) with every offset and length checked against the buffer.

The flatbuffers runtime trusts its input; this reader does not: any bad offset, length or vtable
raises ETDumpError naming the file, and no allocation exceeds the buffer's own size.
"""

from __future__ import annotations

import struct
from pathlib import Path

from stages.formats.etdump.records import (
    ETDUMP_FILE_IDENTIFIER,
    AllocationEvent,
    DebugEvent,
    ETDumpData,
    ETDumpError,
    Event,
    ProfileEvent,
    RunData,
    TensorRecord,
    ValueRecord,
)

_U8 = struct.Struct("<B")
_I8 = struct.Struct("<b")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


class _Buffer:
    """Bounds-checked little-endian reads over one flatbuffer."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.where = where

    def fail(self, what: str) -> ETDumpError:
        return ETDumpError(f"{self.where}: {what}")

    def read(self, fmt: struct.Struct, pos: int) -> int | float:
        if pos < 0 or pos + fmt.size > len(self.data):
            raise self.fail(f"offset {pos} out of range (buffer is {len(self.data)} bytes)")
        value: int | float = fmt.unpack_from(self.data, pos)[0]
        return value

    def uoffset(self, pos: int) -> int:
        target = pos + int(self.read(_U32, pos))
        if target >= len(self.data):
            raise self.fail(f"offset at {pos} points past the end ({target})")
        return target

    def table(self, pos: int) -> _Table:
        vtable = pos - int(self.read(_I32, pos))
        vsize = int(self.read(_U16, vtable))
        if vsize < 4 or vsize % 2 or vtable + vsize > len(self.data):
            raise self.fail(f"table at {pos} has a corrupt vtable")
        return _Table(self, pos, vtable, vsize)


class _Table:
    __slots__ = ("buf", "pos", "vsize", "vtable")

    def __init__(self, buf: _Buffer, pos: int, vtable: int, vsize: int) -> None:
        self.buf, self.pos, self.vtable, self.vsize = buf, pos, vtable, vsize

    def _field(self, slot: int) -> int:
        entry = 4 + 2 * slot
        if entry >= self.vsize:
            return 0
        rel = int(self.buf.read(_U16, self.vtable + entry))
        return self.pos + rel if rel else 0

    def scalar(self, slot: int, fmt: struct.Struct, default: int | float) -> int | float:
        pos = self._field(slot)
        return self.buf.read(fmt, pos) if pos else default

    def table(self, slot: int) -> _Table | None:
        pos = self._field(slot)
        return self.buf.table(self.buf.uoffset(pos)) if pos else None

    def _vector(self, slot: int, element_size: int) -> tuple[int, int]:
        pos = self._field(slot)
        if not pos:
            return 0, 0
        start = self.buf.uoffset(pos)
        length = int(self.buf.read(_U32, start))
        if start + 4 + length * element_size > len(self.buf.data):
            raise self.buf.fail(f"vector at {start} of {length} elements runs past the end")
        return start + 4, length

    def string(self, slot: int) -> str:
        start, length = self._vector(slot, 1)
        raw = self.buf.data[start : start + length]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.buf.fail(f"string at {start} is not UTF-8") from exc

    def bytes_(self, slot: int) -> bytes:
        start, length = self._vector(slot, 1)
        return bytes(self.buf.data[start : start + length])

    def longs(self, slot: int) -> tuple[int, ...]:
        start, length = self._vector(slot, 8)
        return struct.unpack_from(f"<{length}q", self.buf.data, start) if length else ()

    def tables(self, slot: int) -> list[_Table]:
        start, length = self._vector(slot, 4)
        return [self.buf.table(self.buf.uoffset(start + 4 * i)) for i in range(length)]


def _tensor(t: _Table) -> TensorRecord:
    return TensorRecord(
        scalar_type=int(t.scalar(0, _I8, 0)),
        sizes=t.longs(1),
        strides=t.longs(2),
        offset=int(t.scalar(3, _I64, 0)),
    )


def _sub_scalar(t: _Table, slot: int, fmt: struct.Struct) -> int | float | None:
    sub = t.table(slot)
    return sub.scalar(0, fmt, 0) if sub is not None else None


def _value(t: _Table) -> ValueRecord:
    tensor = t.table(1)
    tensor_list = t.table(2)
    bool_v = _sub_scalar(t, 6, _U8)
    output = _sub_scalar(t, 7, _U8)
    int_v = _sub_scalar(t, 3, _I64)
    return ValueRecord(
        val=int(t.scalar(0, _I8, 0)),
        tensor=_tensor(tensor) if tensor is not None else None,
        tensor_list=tuple(_tensor(x) for x in tensor_list.tables(0))
        if tensor_list is not None
        else None,
        int_value=int(int_v) if int_v is not None else None,
        float_value=_sub_scalar(t, 4, _F32),
        double_value=_sub_scalar(t, 5, _F64),
        bool_value=bool(bool_v) if bool_v is not None else None,
        output=bool(output) if output is not None else None,
    )


def _event(t: _Table) -> Event:
    profile = t.table(0)
    if profile is not None:
        return Event(
            profile_event=ProfileEvent(
                name=profile.string(0),
                chain_index=int(profile.scalar(1, _I32, 0)),
                instruction_id=int(profile.scalar(2, _I32, -1)),
                delegate_debug_id_int=int(profile.scalar(3, _I32, -1)),
                delegate_debug_id_str=profile.string(4),
                delegate_debug_metadata=profile.bytes_(5),
                start_time=int(profile.scalar(6, _U64, 0)),
                end_time=int(profile.scalar(7, _U64, 0)),
            )
        )
    allocation = t.table(1)
    if allocation is not None:
        return Event(
            allocation_event=AllocationEvent(
                allocator_id=int(allocation.scalar(0, _I32, 0)),
                allocation_size=int(allocation.scalar(1, _U64, 0)),
            )
        )
    debug = t.table(2)
    if debug is not None:
        entry = debug.table(2)
        return Event(
            debug_event=DebugEvent(
                chain_index=int(debug.scalar(0, _U64, 0)),
                instruction_id=int(debug.scalar(1, _I32, -1)),
                debug_entry=_value(entry) if entry is not None else None,
                delegate_debug_id_int=int(debug.scalar(3, _I32, -1)),
                delegate_debug_id_str=debug.string(4),
                name=debug.string(5),
            )
        )
    return Event()


def read_etdump_bytes(data: bytes, where: str = "<bytes>") -> ETDumpData:
    """Parse a size-prefixed ETDump flatbuffer (the prefix is optional, as ExecuTorch's is)."""
    if len(data) < 12:
        raise ETDumpError(f"{where}: {len(data)} bytes is too short for an ETDump")
    prefixed = data[8:12] == ETDUMP_FILE_IDENTIFIER
    if prefixed:
        size = struct.unpack_from("<I", data, 0)[0]
        if size != len(data) - 4:
            raise ETDumpError(
                f"{where}: size prefix says {size} bytes but {len(data) - 4} follow (truncated?)"
            )
        data = data[4:]
    elif data[4:8] != ETDUMP_FILE_IDENTIFIER:
        raise ETDumpError(f"{where}: file identifier is not 'ED00'; this is not an ETDump")
    buf = _Buffer(data, where)
    try:
        root = buf.table(buf.uoffset(0))
        runs = [
            RunData(
                name=r.string(0),
                bundled_input_index=int(r.scalar(1, _I32, -1)),
                allocators=[a.string(0) for a in r.tables(2)],
                events=[_event(e) for e in r.tables(3)],
            )
            for r in root.tables(1)
        ]
        return ETDumpData(version=int(root.scalar(0, _U32, 0)), run_data=runs)
    except ETDumpError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as exc:
        raise ETDumpError(f"{where}: corrupt ETDump ({type(exc).__name__}: {exc})") from exc


def read_etdump(source: Path | str | bytes) -> ETDumpData:
    """Read an ETDump file (or its bytes)."""
    if isinstance(source, bytes | bytearray):
        return read_etdump_bytes(bytes(source))
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ETDumpError(f"{path}: cannot read ETDump ({exc.strerror or exc})") from exc
    return read_etdump_bytes(data, str(path))
