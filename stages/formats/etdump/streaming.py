"""Read an ETDump lazily: event blocks whose events are decoded from a memory map on each pass.

`open_etdump` keeps per block its name, allocators and where its events are, never a Python
object per event: each pass over `block.events` decodes them again, with the same bounds checks
as `read_etdump`, and the map's pages are handed back to the kernel as the pass goes, so memory
does not grow with the number of events (an ETDump of a million events takes a few MB). Every
event is decoded once when the file is opened, so a corrupt one fails there, naming the file.
The file must stay as it is while the dump is in use (run dirs hold it read-only): a file cut
short under a live map ends the process with SIGBUS, where `read_etdump` would hold a copy.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

from stages.formats.etdump.reader import _event_at, _f, _profile_event, _Reader
from stages.formats.etdump.records import (
    ETDUMP_FILE_IDENTIFIER,
    ETDumpData,
    ETDumpError,
    Event,
    RunData,
)

# Decoded events between two hand-backs of the mapped pages (~80 bytes of file per event).
RELEASE_EVERY = 1 << 16
# Events kept decoded across passes, per file (a few MB): the analysis passes over a small
# ETDump several times (events, map and clock checks, trace) and each pass would decode it
# again; past this many, blocks are decoded on every pass and memory stays flat.
KEEP_EVENTS = 1 << 15
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from


class _MappedReader(_Reader):
    """A `_Reader` over a read-only memory map that drops the pages it touched now and then."""

    def __init__(self, mapped: mmap.mmap, base: int, where: str) -> None:
        # positions as `read_etdump`'s: from the flatbuffer's start, after any size prefix
        super().__init__(memoryview(mapped)[base:], where)
        self.mapped = mapped
        self.decoded = 0
        self.kept = 0  # events held decoded by the blocks (KEEP_EVENTS at most)

    def release(self) -> None:
        """Hand the touched pages back (they stay in the page cache; a later read faults them
        in again), so the resident set does not grow with the file."""
        if hasattr(self.mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            self.mapped.madvise(mmap.MADV_DONTNEED)


class EventsView(Sequence[Event]):
    """One block's events, decoded from the file whenever they are read; a pass holds one
    block's events at a time (a block is one execution), nothing is kept after it."""

    def __init__(self, reader: _MappedReader, start: int, length: int) -> None:
        self._reader = reader
        self._start = start  # the first element of the block's vector of event offsets
        self._length = length
        self.debug_events: int | None = None  # counted when the file is opened
        self._kept: list[Event] | None = None  # the block decoded, while KEEP_EVENTS allows

    def __len__(self) -> int:
        return self._length

    def _decode(self, first: int, stop: int) -> list[Event]:
        r = self._reader
        data, size, start, layouts = r.data, r.size, self._start, r.layouts
        try:
            out: list[Event] = []
            append = out.append
            for i in range(first, stop):
                pos = start + 4 * i
                found = pos + _U32(data, pos)[0]
                if found >= size:
                    raise r.fail(f"offset at {pos} points past the end ({found})")
                # a profile event (nearly all of them) with a known layout: fewer calls
                key = (found - _I32(data, found)[0]) * 16 + 3 if found <= size - 4 else -1
                layout = layouts.get(key)
                if layout is not None and layout[0] and found + layout[-1] <= size:
                    append(Event(_profile_event(r, r.target(found + layout[0]))))
                else:
                    append(_event_at(r, found))
        except ETDumpError:
            raise
        except (struct.error, IndexError, ValueError, OverflowError) as exc:
            raise ETDumpError(f"{r.where}: corrupt ETDump ({type(exc).__name__}: {exc})") from exc
        before, r.decoded = r.decoded, r.decoded + len(out)
        if before // RELEASE_EVERY != r.decoded // RELEASE_EVERY:
            r.release()
        return out

    def _all(self) -> list[Event]:
        """Every event of the block: kept from an earlier pass, or decoded (and kept while the
        file's KEEP_EVENTS allow)."""
        if self._kept is not None:
            return self._kept
        events = self._decode(0, self._length)
        if self._reader.kept + self._length <= KEEP_EVENTS:
            self._kept, self._reader.kept = events, self._reader.kept + self._length
        return events

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...

    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        if self._kept is not None:
            return self._kept[i]
        if isinstance(i, slice):
            first, stop, step = i.indices(self._length)
            if step == 1:
                return self._decode(first, max(first, stop))
            return [self._decode(j, j + 1)[0] for j in range(first, stop, step)]
        if i < 0:
            i += self._length
        if not 0 <= i < self._length:
            raise IndexError(f"event {i} of a block of {self._length}")
        return self._decode(i, i + 1)[0]

    def __iter__(self) -> Iterator[Event]:
        return iter(self._all())


def holds_debug_events(block: RunData) -> bool:
    """Whether a block logged any value (a capture block); known without decoding for a block
    of `open_etdump`, so passes that want logged values skip the timed blocks."""
    if isinstance(block.events, EventsView) and block.events.debug_events is not None:
        return block.events.debug_events > 0
    return any(e.debug_event is not None for e in block.events)


def _blocks(r: _MappedReader) -> ETDumpData:
    root = r.fields(r.target(0))
    runs = []
    for run_pos in r.tables(_f(root, 1)):
        rf = r.fields(run_pos)
        events = _f(rf, 3)
        start, length = r.vector(events, 4) if events else (0, 0)
        runs.append(
            RunData(
                name=r.string(_f(rf, 0)),
                bundled_input_index=int(r.scalar(rf, 1, "<i", -1)),
                allocators=[r.string(_f(r.fields(a), 0)) for a in r.tables(_f(rf, 2))],
                events=EventsView(r, start, length),
            )
        )
    return ETDumpData(version=int(r.scalar(root, 0, "<I", 0)), run_data=runs)


def _check_every_event(dump: ETDumpData, r: _MappedReader) -> None:
    """Decode each event once and drop it (a corrupt file fails on opening, not mid-analysis),
    counting each block's debug events."""
    for block in dump.run_data:
        view = block.events
        assert isinstance(view, EventsView)
        view.debug_events = sum(e.debug_event is not None for e in view)
    r.release()


def open_etdump(path: Path | str) -> ETDumpData:
    """An ETDump file whose blocks' `events` are `EventsView`s over a memory map of it."""
    path = Path(path)
    where = str(path)
    try:
        with path.open("rb") as fh:
            size = path.stat().st_size
            if size < 12:
                raise ETDumpError(f"{where}: {size} bytes is too short for an ETDump")
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ETDumpError(f"{where}: cannot read ETDump ({exc.strerror or exc})") from exc
    base = 0
    if mapped[8:12] == ETDUMP_FILE_IDENTIFIER:
        prefix = _U32(mapped, 0)[0]
        if prefix != size - 4:
            raise ETDumpError(
                f"{where}: size prefix says {prefix} bytes but {size - 4} follow (truncated?)"
            )
        base = 4
    elif mapped[4:8] != ETDUMP_FILE_IDENTIFIER:
        raise ETDumpError(f"{where}: file identifier is not 'ED00'; this is not an ETDump")
    r = _MappedReader(mapped, base, where)
    try:
        dump = _blocks(r)
        _check_every_event(dump, r)
    except ETDumpError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as exc:
        raise ETDumpError(f"{where}: corrupt ETDump ({type(exc).__name__}: {exc})") from exc
    return dump
