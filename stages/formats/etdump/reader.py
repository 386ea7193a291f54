"""Read ETDumps (ours or ExecuTorch's) with every offset and length checked against the buffer.

The flatbuffers runtime trusts its input; this reader does not: any bad offset, length or vtable
raises ETDumpError naming the file, and no allocation exceeds the buffer's own size. Vtables are
parsed once and cached (flatbuffers shares one vtable among tables of the same shape), which keeps
a 100-iteration ETDump well under a second.
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
from stages.paused_gc import paused_gc

_unpack = struct.unpack_from
# Vtables and layouts cached per reader at most: flatbuffers shares one vtable among tables of
# one shape, so a real file has a handful; a crafted one with a vtable per table cannot grow them.
_CACHE_LIMIT = 4096


class _Reader:
    """Bounds-checked table access over one flatbuffer (no size prefix)."""

    def __init__(self, data: bytes | memoryview, where: str) -> None:
        self.data = data
        self.size = len(data)
        self.where = where
        self._vtables: dict[int, tuple[int, ...]] = {}
        self.layouts: dict[int, tuple[int, ...]] = {}

    def fail(self, what: str) -> ETDumpError:
        return ETDumpError(f"{self.where}: {what}")

    def fields(self, pos: int) -> tuple[int, ...]:
        """Absolute positions of a table's fields (0 = absent)."""
        if pos < 0 or pos + 4 > self.size:
            raise self.fail(f"table offset {pos} out of range (buffer is {self.size} bytes)")
        vtable = pos - _unpack("<i", self.data, pos)[0]
        rel = self._vtables.get(vtable)
        if rel is None:
            if vtable < 0 or vtable + 4 > self.size:
                raise self.fail(f"table at {pos} points at a vtable out of range")
            vsize, osize = _unpack("<HH", self.data, vtable)
            if vsize < 4 or vsize % 2 or vtable + vsize > self.size:
                raise self.fail(f"table at {pos} has a corrupt vtable")
            rel = _unpack(f"<{(vsize - 4) // 2}H", self.data, vtable + 4)
            if any(r and r + 1 > osize for r in rel):
                raise self.fail(f"vtable at {vtable} has a field outside its table")
            if len(self._vtables) >= _CACHE_LIMIT:  # a hostile file: a vtable per table
                self._vtables.clear()
            self._vtables[vtable] = rel
        if pos + (max(rel) if rel else 0) > self.size:
            raise self.fail(f"table at {pos} runs past the end")
        return tuple(pos + r if r else 0 for r in rel)

    def target(self, pos: int) -> int:
        """Follow a uoffset."""
        if pos + 4 > self.size:
            raise self.fail(f"offset at {pos} out of range")
        found = pos + _unpack("<I", self.data, pos)[0]
        if found >= self.size:
            raise self.fail(f"offset at {pos} points past the end ({found})")
        return found

    def vector(self, pos: int, element_size: int) -> tuple[int, int]:
        start = self.target(pos)
        if start + 4 > self.size:
            raise self.fail(f"vector at {start} out of range")
        length = _unpack("<I", self.data, start)[0]
        if start + 4 + length * element_size > self.size:
            raise self.fail(f"vector at {start} of {length} elements runs past the end")
        return start + 4, length

    def string(self, pos: int) -> str:
        if not pos:
            return ""
        start, length = self.vector(pos, 1)
        try:
            return str(self.data[start : start + length], "utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"string at {start} is not UTF-8") from exc

    def blob(self, pos: int) -> bytes:
        if not pos:
            return b""
        start, length = self.vector(pos, 1)
        return bytes(self.data[start : start + length])

    def tables(self, pos: int) -> list[int]:
        if not pos:
            return []
        start, length = self.vector(pos, 4)
        return [self.target(start + 4 * i) for i in range(length)]

    def longs(self, pos: int) -> tuple[int, ...]:
        if not pos:
            return ()
        start, length = self.vector(pos, 8)
        return _unpack(f"<{length}q", self.data, start) if length else ()

    def scalar(
        self, fields: tuple[int, ...], slot: int, fmt: str, default: int | float
    ) -> int | float:
        if slot >= len(fields) or not fields[slot]:
            return default
        value: int | float = _unpack(fmt, self.data, fields[slot])[0]
        return value

    def sub(self, fields: tuple[int, ...], slot: int) -> int:
        return self.target(fields[slot]) if slot < len(fields) and fields[slot] else 0


def _f(fields: tuple[int, ...], slot: int) -> int:
    return fields[slot] if slot < len(fields) else 0


def _tensor(r: _Reader, pos: int) -> TensorRecord:
    f = r.fields(pos)
    return TensorRecord(
        scalar_type=int(r.scalar(f, 0, "<b", 0)),
        sizes=r.longs(_f(f, 1)),
        strides=r.longs(_f(f, 2)),
        offset=int(r.scalar(f, 3, "<q", 0)),
    )


def _boxed(r: _Reader, f: tuple[int, ...], slot: int, fmt: str) -> int | float | None:
    pos = r.sub(f, slot)
    return r.scalar(r.fields(pos), 0, fmt, 0) if pos else None


def _value(r: _Reader, pos: int) -> ValueRecord:
    f = r.fields(pos)
    tensor = r.sub(f, 1)
    tensor_list = r.sub(f, 2)
    int_v, bool_v, output = _boxed(r, f, 3, "<q"), _boxed(r, f, 6, "<B"), _boxed(r, f, 7, "<B")
    return ValueRecord(
        val=int(r.scalar(f, 0, "<b", 0)),
        tensor=_tensor(r, tensor) if tensor else None,
        tensor_list=tuple(_tensor(r, t) for t in r.tables(_f(r.fields(tensor_list), 0)))
        if tensor_list
        else None,
        int_value=int(int_v) if int_v is not None else None,
        float_value=_boxed(r, f, 4, "<f"),
        double_value=_boxed(r, f, 5, "<d"),
        bool_value=bool(bool_v) if bool_v is not None else None,
        output=bool(output) if output is not None else None,
    )


_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


def _layout(r: _Reader, pos: int, slots: int) -> tuple[int, ...]:
    """Field offsets of the table at pos, relative, padded to `slots` (0 = absent)."""
    if pos < 0 or pos + 4 > r.size:
        raise r.fail(f"table offset {pos} out of range (buffer is {r.size} bytes)")
    key = (pos - _I32(r.data, pos)[0]) * 16 + slots
    layout = r.layouts.get(key)
    if layout is None:
        absolute = r.fields(pos)
        rel = tuple(a - pos if a else 0 for a in absolute)
        layout = (*(rel + (0,) * slots)[:slots], max(rel, default=0) + 1)
        if len(r.layouts) >= _CACHE_LIMIT:
            r.layouts.clear()
        r.layouts[key] = layout
    if pos + layout[-1] > r.size:
        raise r.fail(f"table at {pos} runs past the end")
    return layout


def _string_at(r: _Reader, field: int) -> str:
    start = field + _U32(r.data, field)[0]
    if start + 4 > r.size:
        raise r.fail(f"string offset at {field} points past the end")
    end = start + 4 + _U32(r.data, start)[0]
    if end > r.size:
        raise r.fail(f"string at {start} runs past the end")
    try:
        return str(r.data[start + 4 : end], "utf-8")
    except UnicodeDecodeError as exc:
        raise r.fail(f"string at {start} is not UTF-8") from exc


def _profile_event(r: _Reader, pos: int) -> ProfileEvent:
    data = r.data
    layout = r.layouts.get((pos - _I32(data, pos)[0]) * 16 + 8) if 0 <= pos <= r.size - 4 else None
    if layout is None or pos + layout[-1] > r.size:
        layout = _layout(r, pos, 8)
    n, c, i, di, ds, md, st, en, _ = layout
    return ProfileEvent(
        _string_at(r, pos + n) if n else "",
        _I32(data, pos + c)[0] if c else 0,
        _I32(data, pos + i)[0] if i else -1,
        _I32(data, pos + di)[0] if di else -1,
        _string_at(r, pos + ds) if ds else "",
        r.blob(pos + md) if md else b"",
        _U64(data, pos + st)[0] if st else 0,
        _U64(data, pos + en)[0] if en else 0,
    )


def _event(r: _Reader, pos: int) -> Event:
    profile_slot, _allocation_slot, _debug_slot, _ = _layout(r, pos, 3)
    if profile_slot:
        return Event(profile_event=_profile_event(r, r.target(pos + profile_slot)))
    f = r.fields(pos)
    allocation = r.sub(f, 1)
    if allocation:
        a = r.fields(allocation)
        return Event(
            allocation_event=AllocationEvent(
                int(r.scalar(a, 0, "<i", 0)), int(r.scalar(a, 1, "<Q", 0))
            )
        )
    debug = r.sub(f, 2)
    if debug:
        d = r.fields(debug)
        entry = r.sub(d, 2)
        return Event(
            debug_event=DebugEvent(
                int(r.scalar(d, 0, "<Q", 0)),
                int(r.scalar(d, 1, "<i", -1)),
                _value(r, entry) if entry else None,
                int(r.scalar(d, 3, "<i", -1)),
                r.string(_f(d, 4)),
                r.string(_f(d, 5)),
            )
        )
    return Event()


def _event_at(r: _Reader, pos: int) -> Event:
    """The event table at pos; the common case (a profile event) takes a path with no extra
    calls."""
    data, size = r.data, r.size
    layout = r.layouts.get((pos - _I32(data, pos)[0]) * 16 + 3) if 0 <= pos <= size - 4 else None
    if layout is not None and layout[0] and pos + layout[-1] <= size:
        return Event(_profile_event(r, r.target(pos + layout[0])))
    return _event(r, pos)


def _events(r: _Reader, field: int) -> list[Event]:
    """Events of a run, decoded at once."""
    return [_event_at(r, pos) for pos in r.tables(field)]


def read_etdump_bytes(data: bytes, where: str = "<bytes>") -> ETDumpData:
    """Parse a size-prefixed ETDump flatbuffer (an unprefixed one is accepted too)."""
    if len(data) < 12:
        raise ETDumpError(f"{where}: {len(data)} bytes is too short for an ETDump")
    if data[8:12] == ETDUMP_FILE_IDENTIFIER:
        size = _unpack("<I", data, 0)[0]
        if size != len(data) - 4:
            raise ETDumpError(
                f"{where}: size prefix says {size} bytes but {len(data) - 4} follow (truncated?)"
            )
        data = data[4:]
    elif data[4:8] != ETDUMP_FILE_IDENTIFIER:
        raise ETDumpError(f"{where}: file identifier is not 'ED00'; this is not an ETDump")
    r = _Reader(bytes(data), where)
    try:
        with paused_gc():  # ~50,000 acyclic objects for a 100-iteration dump
            return _read_root(r)
    except ETDumpError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as exc:
        raise ETDumpError(f"{where}: corrupt ETDump ({type(exc).__name__}: {exc})") from exc


def _read_root(r: _Reader) -> ETDumpData:
    root = r.fields(r.target(0))
    runs = []
    for run_pos in r.tables(_f(root, 1)):
        rf = r.fields(run_pos)
        runs.append(
            RunData(
                name=r.string(_f(rf, 0)),
                bundled_input_index=int(r.scalar(rf, 1, "<i", -1)),
                allocators=[r.string(_f(r.fields(a), 0)) for a in r.tables(_f(rf, 2))],
                events=_events(r, _f(rf, 3)),
            )
        )
    return ETDumpData(version=int(r.scalar(root, 0, "<I", 0)), run_data=runs)


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
