"""open_etdump: the same events as read_etdump, the same refusals, and nothing kept per event."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest

from stages.formats.etdump import (
    ETDumpData,
    ETDumpError,
    Event,
    ProfileEvent,
    RunData,
    read_etdump,
    streaming,
    write_etdump,
)
from stages.formats.etdump.streaming import EventsView, holds_debug_events, open_etdump
from tests.helpers.executorch_fixtures import executorch_fixtures
from tests.helpers.fuzzing import mutate_bytes

EXECUTORCH_DUMPS = ["etdump_1run.etdp", "etdump_1run_debug.etdp"]


def _timed_dump(iterations: int, events_per_iteration: int = 50) -> ETDumpData:
    """One 'Execute' block per iteration, as our run stage and ExecuTorch's runtime write."""
    blocks = [
        RunData(
            "Execute",
            events=[
                Event(
                    ProfileEvent(
                        f"op_{i}", 0, i, i % 3 - 1, "", b"", 1000 * it + i, 1000 * it + i + 7
                    )
                )
                for i in range(events_per_iteration)
            ],
        )
        for it in range(iterations)
    ]
    return ETDumpData(0, blocks)


def _same(eager: ETDumpData, lazy: ETDumpData) -> None:
    assert eager.version == lazy.version
    assert len(eager.run_data) == len(lazy.run_data)
    for a, b in zip(eager.run_data, lazy.run_data, strict=True):
        assert (a.name, a.bundled_input_index, a.allocators) == (
            b.name,
            b.bundled_input_index,
            b.allocators,
        )
        assert list(a.events) == list(b.events)
        assert len(a.events) == len(b.events)


@pytest.mark.parametrize("name", EXECUTORCH_DUMPS)
def test_executorch_etdumps_read_the_same_lazily(name: str) -> None:
    path = executorch_fixtures() / name
    lazy = open_etdump(path)
    _same(read_etdump(path), lazy)
    for block in lazy.run_data:
        assert isinstance(block.events, EventsView)
        assert holds_debug_events(block) == any(e.debug_event for e in block.events)
    debug = read_etdump(executorch_fixtures() / "etdump_1run_debug.etdp")
    assert any(holds_debug_events(b) for b in debug.run_data)  # the list path agrees


def test_indexing_and_slicing_decode_the_events_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "etdump.etdp"
    write_etdump(path, _timed_dump(3, 20))
    eager, lazy = read_etdump(path).run_data[1].events, open_etdump(path).run_data[1].events
    assert lazy[0] == eager[0] and lazy[-1] == eager[-1] and lazy[19] == eager[19]
    assert lazy[3:9] == eager[3:9] and lazy[::4] == eager[::4] and lazy[15:2] == []
    with pytest.raises(IndexError):
        lazy[20]


def test_corrupt_files_are_refused_on_opening_as_read_etdump_refuses_them(
    tmp_path: Path,
) -> None:
    """Byte mutations of real ETDumps: open_etdump refuses (ETDumpError naming the file) exactly
    what read_etdump refuses, on opening, and reads the same events from the rest."""
    rng = random.Random(26)
    originals = [(executorch_fixtures() / n).read_bytes() for n in EXECUTORCH_DUMPS]
    ours = tmp_path / "ours.etdp"
    write_etdump(ours, _timed_dump(4, 10))
    originals.append(ours.read_bytes())
    refused = 0
    for trial in range(300):
        data = mutate_bytes(rng.choice(originals), rng)
        path = tmp_path / f"mutated_{trial}.etdp"
        path.write_bytes(data)
        try:
            eager = read_etdump(path)
        except ETDumpError:
            with pytest.raises(ETDumpError, match=str(path.name)):
                open_etdump(path)
            refused += 1
            continue
        _same(eager, open_etdump(path))
    assert refused > 50  # the mutations did reach the checks


def test_short_and_missing_files_name_the_file(tmp_path: Path) -> None:
    short = tmp_path / "short.etdp"
    short.write_bytes(b"\x00" * 8)
    with pytest.raises(ETDumpError, match=r"short\.etdp.*too short"):
        open_etdump(short)
    with pytest.raises(ETDumpError, match=r"missing\.etdp.*cannot read"):
        open_etdump(tmp_path / "missing.etdp")


def _held_bytes(path: Path) -> tuple[int, ETDumpData]:
    """Python memory an opened ETDump holds (tracemalloc: allocations, not wall clock)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        dump = open_etdump(path)
        for block in dump.run_data:  # a full pass keeps nothing either
            for _ in block.events:
                pass
        return tracemalloc.get_traced_memory()[0] - before, dump
    finally:
        tracemalloc.stop()


def test_an_opened_etdump_holds_no_memory_per_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past KEEP_EVENTS (set to none here, so these small files take that path) every pass
    decodes its block again and nothing is held per event."""
    monkeypatch.setattr(streaming, "KEEP_EVENTS", 0)
    sizes = {}
    for iterations in (20, 200):
        path = tmp_path / f"etdump_{iterations}.etdp"
        write_etdump(path, _timed_dump(iterations, 100))
        held, dump = _held_bytes(path)
        sizes[iterations] = (held, sum(len(b.events) for b in dump.run_data))
    (small, small_events), (big, big_events) = sizes[20], sizes[200]
    per_event = (big - small) / (big_events - small_events)
    # What remains per block (its name, allocators, a view) is spread over its 100 events; the
    # decoded events themselves (~300 bytes each as objects) are never kept.
    assert per_event < 16, f"{per_event:.1f} bytes held per event"


def test_events_kept_across_passes_stop_at_keep_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small file is decoded once and its blocks kept for later passes, up to KEEP_EVENTS
    events per file; later blocks are decoded on every pass, with the same events."""
    monkeypatch.setattr(streaming, "KEEP_EVENTS", 250)
    path = tmp_path / "etdump.etdp"
    write_etdump(path, _timed_dump(5, 100))
    dump = open_etdump(path)
    views = [b.events for b in dump.run_data]
    kept = [v for v in views if isinstance(v, EventsView) and v._kept is not None]
    assert len(kept) == 2 and sum(len(v) for v in kept) <= 250  # 100 events a block
    assert [list(v) for v in views] == [b.events for b in read_etdump(path).run_data]
