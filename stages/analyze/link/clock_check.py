"""Check a delegate's kernel timestamps against its own delegate call, in the ETDump's numbers.

The runtime times each delegate call on its own clock (ns); a backend's kernel events are read
with the class's `ticks_per_ms`. Kernels ≥ 10 × longer than the calls that enclose them, or
≤ 1/10 of them while a ≥ 10 × slower common clock would fit them too, mean the clock is wrong: a
`clock_mismatch` finding naming the likely value.

It is judged per execution, by the median: each timed block gives the ratio of a partition's
kernels to its calls in that block, and the median ratio is judged. A wrong clock is wrong on
every call; one call the OS preempted (4 ms where the others took 3 µs, the kernels' own time
unchanged) moves a sum by a factor of a thousand and the median not at all.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field

from stages.analyze.link.linking import NS_PER_MS, ProgramIndex, identifier_of
from stages.backends.delegate_map_findings import MapFinding
from stages.closed_sets import MapFindingKind
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import DELEGATE_CALL_EVENT, STAMP_EVENTS, RunData
from stages.formats.etdump.streaming import holds_debug_events

CLOCK_FACTOR = 10.0  # kernels this many times longer or shorter than their call: a wrong clock
MAX_BLOCKS = 64  # timed blocks read: a wrong clock shows in every one, the first few suffice
# Clocks a backend is likely to stamp with: ticks per ms of ps, ns, µs and ms counters.
COMMON_TICKS_PER_MS = (1e9, 1e6, 1e3, 1.0)


@dataclass
class _Totals:
    """Per partition: the delegate calls' total (ms), their kernels' total (ticks), and per
    timed block that ran kernels, the ratio of its kernels' ticks to its calls' ms."""

    call_ms: float = 0.0
    kernel_ticks: float = 0.0
    calls: int = 0
    ticks_per_call_ms: list[float] = field(default_factory=list)


def _block_totals(block: RunData, index: ProgramIndex, totals: dict[int, _Totals]) -> None:
    """Add one block's delegate calls and the kernel events logged inside them."""
    here: dict[int, _Totals] = {}
    for event in block.events:
        pe = event.profile_event
        if pe is None or pe.name in STAMP_EVENTS:
            continue
        record = index.delegate_instructions.get(pe.instruction_id)
        if record is None:
            continue
        entry = here.setdefault(record.partition_id, _Totals())
        ident = identifier_of(pe.delegate_debug_id_int, pe.delegate_debug_id_str)
        if ident is None and pe.name == DELEGATE_CALL_EVENT:
            entry.call_ms += (pe.end_time - pe.start_time) / NS_PER_MS
            entry.calls += 1
        elif ident is not None:
            entry.kernel_ticks += pe.end_time - pe.start_time
    for pid, entry in here.items():
        total = totals.setdefault(pid, _Totals())
        total.call_ms += entry.call_ms
        total.kernel_ticks += entry.kernel_ticks
        total.calls += entry.calls
        if entry.calls and entry.call_ms > 0 and entry.kernel_ticks > 0:
            total.ticks_per_call_ms.append(entry.kernel_ticks / entry.call_ms)


def _timed_blocks(dump: ETDumpData) -> Iterator[RunData]:
    """Blocks that logged no values (a capture block's calls include the logging's cost)."""
    taken = 0
    for block in dump.run_data:
        if taken >= MAX_BLOCKS:
            return
        if not holds_debug_events(block):
            taken += 1
            yield block


def likely_ticks_per_ms(ticks_per_ms: float, ratio: float) -> float:
    """The common clock under which the kernels fill most of their calls without overflowing
    them (kernels run inside the call); the slowest clock if none fits."""
    fills = {t: ratio * ticks_per_ms / t for t in COMMON_TICKS_PER_MS}
    fitting = [t for t, fill in fills.items() if fill <= 1.0]
    if not fitting:
        return min(COMMON_TICKS_PER_MS, key=lambda t: fills[t])
    return max(fitting, key=lambda t: fills[t])


def _clock_is_off(ratio: float, ticks_per_ms: float) -> bool:
    """Whether kernels `ratio` x their calls' time mean a wrong clock: kernels can never outlast
    their call; they may fill little of it (host overhead around them), which is a clock error
    only when a >= 10 x slower common clock fits as well."""
    likely = likely_ticks_per_ms(ticks_per_ms, ratio)
    return ratio >= CLOCK_FACTOR or (
        ratio <= 1 / CLOCK_FACTOR and likely * CLOCK_FACTOR <= ticks_per_ms
    )


def _finding(pid: int, backend: str, total: _Totals, ticks_per_ms: float) -> MapFinding | None:
    kernel_ms = total.kernel_ticks / ticks_per_ms
    if not total.ticks_per_call_ms or kernel_ms <= 0:
        return None
    ratios = [ticks / ticks_per_ms for ticks in total.ticks_per_call_ms]
    ratio = statistics.median(ratios)  # per execution: a preempted call is one of many
    if not _clock_is_off(ratio, ticks_per_ms):
        return None
    likely = likely_ticks_per_ms(ticks_per_ms, ratio)
    off = sum(_clock_is_off(r, ticks_per_ms) for r in ratios)
    shape = "longer" if ratio > 1 else "shorter"
    return MapFinding(
        MapFindingKind.clock_mismatch,
        pid,
        backend,
        message=(
            f"partition {pid} ({backend}): its kernel events add up to {kernel_ms:.3g} ms over "
            f"{total.calls} delegate call(s) of {total.call_ms:.3g} ms in all; in the median "
            f"execution they take {ratio:.3g} x the calls that enclose them ({shape} by a factor "
            f">= {CLOCK_FACTOR:g}; {off} of {len(ratios)} executions are off); their timestamps "
            f"are read at ticks_per_ms={ticks_per_ms:g}, the likely clock is ticks_per_ms="
            f"{likely:g}: set it on the backend class (or convert the stamps); kernel times are wrong"
        ),
        stage="analyze",
        numbers={
            "kernel_total_ms": kernel_ms,
            "delegate_call_total_ms": total.call_ms,
            "delegate_calls": total.calls,
            "ratio": ratio,
            "executions": len(ratios),
            "executions_off": off,
            "ticks_per_ms": ticks_per_ms,
            "likely_ticks_per_ms": likely,
        },
    )


def check_clocks(dump: ETDumpData, index: ProgramIndex) -> list[MapFinding]:
    """A `clock_mismatch` per partition whose kernels are ≥ 10 x off from their delegate calls
    in the median timed execution."""
    totals: dict[int, _Totals] = {}
    for block in _timed_blocks(dump):
        _block_totals(block, index, totals)
    backends = {m.partition_id: m.backend_name for m in index.maps}
    found = (
        _finding(pid, backends.get(pid, index.backend), t, index.delegate_ticks_per_ms)
        for pid, t in sorted(totals.items())
    )
    return [f for f in found if f is not None]
