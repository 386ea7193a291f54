"""Which method of the program each event block of an ETDump belongs to.

ExecuTorch's runtime writes a load block ('Default': `Method::init`, `Program::load_method`)
when it loads a method and one block per execution after it; nothing in an event names the
method. A load block starts a new method; an execution block whose events (names, instruction
ids, delegate identifiers) repeat an earlier method's execution belongs to that method. Blocks
before any load block belong to the first method. Methods are numbered in load order.
"""

from __future__ import annotations

from dataclasses import dataclass

from stages.formats.etdump.records import STAMP_EVENTS, ETDumpData, RunData

LOAD_EVENTS = frozenset({"Method::init", "Program::load_method"})


@dataclass(frozen=True)
class MethodBlocks:
    """The event blocks of one method, as an ETDump of their own."""

    ordinal: int  # 0, 1, ... in load order
    dump: ETDumpData

    @property
    def label(self) -> str:
        return f"method {self.ordinal + 1}"


def _is_load_block(names: set[str]) -> bool:
    return bool(names) and names <= LOAD_EVENTS | STAMP_EVENTS and bool(names & LOAD_EVENTS)


def _read_block(block: RunData) -> tuple[set[str], tuple[object, ...]]:
    """In one pass over the events: the block's profile event names, and what it runs (its name
    and its events' instructions and identifiers)."""
    names: set[str] = set()
    events = []
    for event in block.events:
        pe, de = event.profile_event, event.debug_event
        if pe is not None:
            names.add(pe.name)
        if pe is not None and pe.name not in STAMP_EVENTS:
            events.append((pe.name, pe.instruction_id, pe.delegate_debug_id_int,
                           pe.delegate_debug_id_str))  # fmt: skip
        elif de is not None:
            events.append(
                ("", de.instruction_id, de.delegate_debug_id_int, de.delegate_debug_id_str)
            )
    return names, (block.name, tuple(events))


def method_ordinals(dump: ETDumpData) -> list[int]:
    """Per event block (in order), the ordinal of the method it belongs to."""
    ordinals: list[int] = []
    current, loads = 0, 0
    seen: dict[tuple[object, ...], int] = {}
    for block in dump.run_data:
        names, signature = _read_block(block)
        if _is_load_block(names):
            current, loads = loads, loads + 1
            ordinals.append(current)
            continue
        ordinals.append(seen.setdefault(signature, current))
    return ordinals


def split_methods(dump: ETDumpData) -> list[MethodBlocks]:
    """The ETDump's blocks per method, in load order (one entry when it has one method)."""
    ordinals = method_ordinals(dump)
    count = max(ordinals, default=0) + 1
    parts = [
        MethodBlocks(
            ordinal,
            ETDumpData(
                dump.version,
                [b for b, o in zip(dump.run_data, ordinals, strict=True) if o == ordinal],
            ),
        )
        for ordinal in range(count)
    ]
    return parts
