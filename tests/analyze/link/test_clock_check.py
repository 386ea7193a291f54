"""The kernels' clock checked against their delegate call, from an ETDump's own numbers: events
built with chosen timestamps, so every figure is exact."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stages.analyze.link.clock_check import check_clocks, likely_ticks_per_ms
from stages.analyze.link.linking import ProgramIndex
from stages.closed_sets import MapFindingKind
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import (
    DELEGATE_CALL_EVENT,
    DebugEvent,
    Event,
    ProfileEvent,
    RunData,
)
from stages.formats.etrecord_types import DelegateMapRecord

CALL_IID = 3
MAP = DelegateMapRecord(0, "npu", {0: (1,), 1: (2,)}, (1, 2))


def _index(ticks_per_ms: float) -> ProgramIndex:
    base = ProgramIndex.empty()
    return replace(
        base,
        delegate_instructions={CALL_IID: MAP},
        maps=(MAP,),
        backend="npu",
        delegate_ticks_per_ms=ticks_per_ms,
    )


def _profile(name: str, ident: int, start: int, end: int) -> Event:
    return Event(profile_event=ProfileEvent(name, 0, CALL_IID, ident, "", b"", start, end))


def _block(call_ns: int, kernels: list[tuple[int, int]]) -> RunData:
    """One execution: a delegate call of `call_ns` (runtime ns) around kernels (start, end) in
    the backend's ticks."""
    events = [_profile(DELEGATE_CALL_EVENT, -1, 1_000, 1_000 + call_ns)]
    events += [_profile(f"k{i}", i, s, e) for i, (s, e) in enumerate(kernels)]
    return RunData("Execute", events=events)


def _dump(*blocks: RunData) -> ETDumpData:
    return ETDumpData(0, list(blocks))


def test_kernels_filling_their_call_are_not_a_finding() -> None:
    # ns stamps at ns: 120 µs of kernels inside a 180 µs call.
    dump = _dump(*[_block(180_000, [(0, 60_000), (60_000, 120_000)])] * 3)
    assert check_clocks(dump, _index(1e6)) == []


def test_microsecond_stamps_read_as_nanoseconds_name_the_likely_clock() -> None:
    # The numbers: 40 µs of kernels inside a 0.18 ms call, stamped in µs, read as ns.
    dump = _dump(_block(180_000, [(0, 25), (25, 40)]), _block(180_000, [(0, 25), (25, 40)]))
    (finding,) = check_clocks(dump, _index(1e6))
    assert finding.kind == MapFindingKind.clock_mismatch and finding.severity == "error"
    assert finding.partition_id == 0 and finding.backend_name == "npu"
    numbers = finding.numbers
    assert numbers["kernel_total_ms"] == pytest.approx(80 / 1e6)
    assert numbers["delegate_call_total_ms"] == pytest.approx(0.36)
    assert numbers["delegate_calls"] == 2
    assert numbers["ratio"] == pytest.approx(80e-6 / 0.36)
    assert numbers["likely_ticks_per_ms"] == 1e3
    assert "ticks_per_ms=1000" in finding.message and "shorter" in finding.message
    assert finding.record()["numbers"]["likely_ticks_per_ms"] == 1e3


def test_nanosecond_stamps_read_as_microseconds_name_the_likely_clock() -> None:
    # 78 ms of kernels inside a 0.31 ms call: ns stamps read at ticks_per_ms=1e3.
    dump = _dump(_block(310_000, [(0, 50_000), (50_000, 78_000)]))
    (finding,) = check_clocks(dump, _index(1e3))
    assert finding.numbers["ratio"] == pytest.approx(78 / 0.31)
    assert finding.numbers["likely_ticks_per_ms"] == 1e6
    assert "longer" in finding.message


def test_just_inside_the_factor_is_not_a_finding_and_at_it_is() -> None:
    inside = _dump(_block(100_000, [(0, 999_999)]))  # 9.99999 x the call
    at = _dump(_block(100_000, [(0, 1_000_000)]))  # exactly 10 x
    assert check_clocks(inside, _index(1e6)) == []
    assert [f.kind for f in check_clocks(at, _index(1e6))] == [MapFindingKind.clock_mismatch]


def test_kernels_filling_little_of_their_call_at_the_only_clock_that_fits_are_overhead() -> None:
    """5% of the call (host work around the kernels): a 1000 x slower clock would overflow the
    call, so the clock is right; at 0.05% the µs clock fits as well and is named."""
    overhead = _dump(_block(1_000_000, [(0, 50_000)]))
    assert check_clocks(overhead, _index(1e6)) == []
    (finding,) = check_clocks(_dump(_block(1_000_000, [(0, 500)])), _index(1e6))
    assert finding.numbers["likely_ticks_per_ms"] == 1e3


def test_capture_blocks_and_calls_without_kernels_are_left_out() -> None:
    logged = Event(debug_event=DebugEvent(0, CALL_IID, None, 0, "", ""))
    capture = _block(180_000, [(0, 1), (1, 2)])
    capture = RunData("Execute", events=[*capture.events, logged])
    silent = _block(180_000, [])
    assert check_clocks(_dump(capture, silent), _index(1e6)) == []


def test_likely_clock_fills_the_call_without_overflowing_it() -> None:
    assert likely_ticks_per_ms(1e6, 2.2e-4) == 1e3
    assert likely_ticks_per_ms(1e3, 250.0) == 1e6
    assert likely_ticks_per_ms(1e6, 1e-9) == 1.0
    assert likely_ticks_per_ms(1.0, 1e12) == 1e9


def test_one_preempted_call_of_ten_is_not_a_wrong_clock() -> None:
    """The issue's Llama partition on ExecuTorch's XNNPACK (ns stamps, read as ns): nine calls of
    3 µs around 0.3 µs of kernels, one call of 4.1 ms (the process preempted; the kernels' own
    time unchanged). Their sum (3 µs of kernels in 4.1 ms of calls) would fit a µs clock; the
    median execution is the true one."""
    calm = [_block(3_000, [(0, 300)]) for _ in range(9)]
    preempted = _block(4_100_000, [(0, 300)])
    assert check_clocks(_dump(*calm[:4], preempted, *calm[4:]), _index(1e6)) == []
    # Two executions, one of them preempted: no majority says the clock is wrong.
    assert check_clocks(_dump(calm[0], preempted), _index(1e6)) == []


def test_a_wrong_clock_is_flagged_on_every_call_even_with_a_preempted_one() -> None:
    """µs stamps read as ns on every call (and ns read as µs): flagged, one preempted call among
    them or not; the finding says how many executions are off."""
    wrong_unit = [_block(180_000, [(0, 25), (25, 40)]) for _ in range(9)]
    preempted = _block(4_100_000, [(0, 25), (25, 40)])
    (finding,) = check_clocks(_dump(*wrong_unit, preempted), _index(1e6))
    assert finding.numbers["likely_ticks_per_ms"] == 1e3
    assert finding.numbers["ratio"] == pytest.approx(40e-6 / 0.18)
    assert (finding.numbers["executions"], finding.numbers["executions_off"]) == (10, 10)
    other_clock = [_block(310_000, [(0, 78_000)]) for _ in range(9)]
    (finding,) = check_clocks(_dump(*other_clock, _block(4_100_000, [(0, 78_000)])), _index(1e3))
    assert finding.numbers["likely_ticks_per_ms"] == 1e6 and "longer" in finding.message
