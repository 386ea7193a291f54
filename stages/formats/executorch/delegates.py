"""The delegate payloads of ExecuTorch's `.pte`, keyed by the instruction that calls them.

A `.pte` is a flatbuffer (identifier `ETnn`) whose `Program.execution_plan[]` holds, per
method, `chains[].instructions[]` (a `DelegateCall` names `delegate_index`) and `delegates[]`
(`BackendDelegate`: backend `id`, `processed` = INLINE `backend_delegate_data[index]` or
SEGMENT `segments[index]`, the latter located by the extended header `eh00` at byte 8:
segment base offset). ETDump events of a delegate carry the instruction id of their
`DelegateCall`, so payloads are keyed by it. Every offset is checked; bad bytes raise
`ExecuTorchProgramError` naming the file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from stages.formats.executorch.program import is_executorch_program
from stages.safe_io.checked_flatbuffer import CheckedBuffer, CheckedTable

EXTENDED_HEADER_MAGIC = b"eh00"
DELEGATE_CALL = 2  # InstructionArguments union: KernelCall=1, DelegateCall=2, ...
SEGMENT = 1  # DataLocation: INLINE=0, SEGMENT=1
MAX_TABLES = 10_000_000


class ExecuTorchProgramError(Exception):
    """A `.pte` that is not ExecuTorch's program or whose delegate data cannot be located."""


@dataclass(frozen=True)
class DelegatePayload:
    """One delegate call of a method: its chain instruction, backend id and processed bytes."""

    instruction_id: int
    backend_id: str
    processed: bytes


def read_delegate_payloads(
    data: bytes, where: str, method: str = "forward"
) -> list[DelegatePayload]:
    """Every delegate call of `method` (chain 0, as ExecuTorch numbers instructions) in order."""
    if not is_executorch_program(data[:8]):
        raise ExecuTorchProgramError(
            f"{where}: not ExecuTorch's program (.pte): no ETnn flatbuffer identifier at bytes 4..8"
        )
    buffer = CheckedBuffer(data, where, ExecuTorchProgramError)
    program = buffer.root()
    plans = program.tables(1, MAX_TABLES)
    plan = next((p for p in plans if p.string(0) == method), None)
    if plan is None:
        names = sorted(p.string(0) for p in plans)
        raise ExecuTorchProgramError(f"{where}: no method {method!r} (it has {names})")
    delegates = plan.tables(7, MAX_TABLES)
    chains = plan.tables(5, MAX_TABLES)
    found: list[DelegatePayload] = []
    for instruction_id, instruction in enumerate(chains[0].tables(2, MAX_TABLES) if chains else []):
        if instruction.ubyte(0) != DELEGATE_CALL:
            continue
        call = instruction.sub(1)
        index = call.int32(0) if call is not None else -1
        if not 0 <= index < len(delegates):
            raise ExecuTorchProgramError(
                f"{where}: instruction {instruction_id} calls delegate {index} of {len(delegates)}"
            )
        delegate = delegates[index]
        found.append(
            DelegatePayload(
                instruction_id, delegate.string(0), _processed(buffer, program, delegate)
            )
        )
    return found


def _processed(buffer: CheckedBuffer, program: CheckedTable, delegate: CheckedTable) -> bytes:
    reference = delegate.sub(1)
    if reference is None:
        raise buffer.fail(f"delegate {delegate.string(0)!r} has no processed data reference")
    location, index = reference.ubyte(0), reference.uint(1)
    if location == SEGMENT:
        segments = program.tables(4, MAX_TABLES)
        if index >= len(segments):
            raise buffer.fail(f"delegate data names segment {index} of {len(segments)}")
        start = _segment_base(buffer) + segments[index].uint64(0)
        size = segments[index].uint64(1)
        buffer.need(start, size, "delegate segment")
        return bytes(buffer.data[start : start + size])
    inline = program.tables(3, MAX_TABLES)
    if index >= len(inline):
        raise buffer.fail(f"delegate data names inline entry {index} of {len(inline)}")
    start, size = inline[index].blob(0)
    return bytes(buffer.data[start : start + size])


def _segment_base(buffer: CheckedBuffer) -> int:
    buffer.need(8, 24, "extended header")
    magic = bytes(buffer.data[8:12])
    if magic != EXTENDED_HEADER_MAGIC:
        raise buffer.fail("delegate data lives in a segment but the program has no eh00 header")
    return int(struct.unpack_from("<Q", buffer.data, 24)[0])
