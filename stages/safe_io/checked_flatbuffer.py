"""Bounds-checked table access on top of the `flatbuffers` runtime, for untrusted files.

The runtime's `Table` trusts its input (a bad offset reads garbage or raises `struct.error`
deep inside it); `CheckedTable` checks every table, vtable, vector and string position
against the buffer before the runtime reads it and raises the caller's error type, so a
reader of a hostile file fails with one clear message naming the file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import flatbuffers.number_types as N
from flatbuffers.table import Table

_UOFFSET = 4
_VSIZE = 2


class CheckedBuffer:
    """One flatbuffer's bytes, what they are called, and the error to raise on bad data."""

    def __init__(self, data: bytes, where: str, error: Callable[[str], Exception]) -> None:
        self.data = bytearray(data)  # the runtime's number reads want a mutable buffer
        self.size = len(data)
        self.where = where
        self.error = error

    def fail(self, what: str) -> Exception:
        return self.error(f"{self.where}: {what}")

    def need(self, pos: int, length: int, what: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise self.fail(
                f"{what} at {pos} (+{length} bytes) lies outside the {self.size}-byte buffer"
            )

    def root(self, offset: int = 0) -> CheckedTable:
        """The root table of a flatbuffer starting at `offset` (its uoffset comes first)."""
        self.need(offset, _UOFFSET, "root offset")
        return self.table(offset + self.uoffset(offset))

    def uoffset(self, pos: int) -> int:
        self.need(pos, _UOFFSET, "offset")
        return int(struct.unpack_from("<I", self.data, pos)[0])

    def table(self, pos: int) -> CheckedTable:
        self.need(pos, _UOFFSET, "table")
        vtable = pos - int(struct.unpack_from("<i", self.data, pos)[0])
        self.need(vtable, 2 * _VSIZE, "vtable")
        vsize, tsize = struct.unpack_from("<HH", self.data, vtable)
        if vsize < 4 or vsize % 2:
            raise self.fail(f"table at {pos} has a corrupt vtable (size {vsize})")
        self.need(vtable, vsize, "vtable")
        self.need(pos, tsize, "table body")
        return CheckedTable(self, Table(self.data, pos), tsize)


class CheckedTable:
    """A table whose field reads are checked; absent fields give the schema's default."""

    def __init__(self, buffer: CheckedBuffer, table: Table, size: int) -> None:
        self.buffer = buffer
        self.table = table
        self.size = size

    def _field(self, slot: int, width: int) -> int:
        """Offset of field `slot` inside the table, 0 when absent."""
        offset = int(self.table.Offset(4 + 2 * slot))
        if offset and offset + width > self.size:
            raise self.buffer.fail(f"table at {self.table.Pos} has field {slot} past its end")
        return offset

    def uint(self, slot: int, default: int = 0) -> int:
        offset = self._field(slot, 4)
        return int(self.table.Get(N.Uint32Flags, self.table.Pos + offset)) if offset else default

    def int32(self, slot: int, default: int = 0) -> int:
        offset = self._field(slot, 4)
        return int(self.table.Get(N.Int32Flags, self.table.Pos + offset)) if offset else default

    def uint64(self, slot: int, default: int = 0) -> int:
        offset = self._field(slot, 8)
        return int(self.table.Get(N.Uint64Flags, self.table.Pos + offset)) if offset else default

    def ubyte(self, slot: int, default: int = 0) -> int:
        offset = self._field(slot, 1)
        return int(self.table.Get(N.Uint8Flags, self.table.Pos + offset)) if offset else default

    def _target(self, slot: int) -> int | None:
        offset = self._field(slot, _UOFFSET)
        if not offset:
            return None
        pos = self.table.Pos + offset
        return pos + self.buffer.uoffset(pos)

    def sub(self, slot: int) -> CheckedTable | None:
        """A table-valued (or union-valued) field."""
        target = self._target(slot)
        return None if target is None else self.buffer.table(target)

    def _vector(self, slot: int, element: int) -> tuple[int, int]:
        """(first element position, length); (0, 0) when absent."""
        start = self._target(slot)
        if start is None:
            return 0, 0
        length = self.buffer.uoffset(start)
        self.buffer.need(start + _UOFFSET, length * element, "vector")
        return start + _UOFFSET, length

    def string(self, slot: int) -> str:
        start, length = self._vector(slot, 1)
        raw = bytes(self.buffer.data[start : start + length])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.buffer.fail(f"string at {start} is not UTF-8") from exc

    def blob(self, slot: int) -> tuple[int, int]:
        """(position, length) of a byte vector, for the caller to slice."""
        return self._vector(slot, 1)

    def uints(self, slot: int) -> tuple[int, ...]:
        start, length = self._vector(slot, 4)
        return struct.unpack_from(f"<{length}I", self.buffer.data, start) if length else ()

    def tables(self, slot: int, limit: int) -> list[CheckedTable]:
        """The tables of a vector field, refusing more than `limit` of them."""
        start, length = self._vector(slot, _UOFFSET)
        if length > limit:
            raise self.buffer.fail(f"a vector of {length} tables exceeds the bound of {limit}")
        return [
            self.buffer.table(start + i * _UOFFSET + self.buffer.uoffset(start + i * _UOFFSET))
            for i in range(length)
        ]
