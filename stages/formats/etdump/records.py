"""Typed records of an ETDump, mirroring ExecuTorch's etdump schema (field for field)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import NamedTuple

ETDUMP_FILE_IDENTIFIER = b"ED00"
ETDUMP_VERSION = 0
# Stamps our run stage adds: the lowered program's sha256, so the analysis can tell an ETDump
# from another program, and the sha256 of the debug buffer's tensor bytes written with it. Each is
# a trailing event block of that name with no events, whose one allocator name is
# "sha256:<hex>": ExecuTorch's Inspector shows an empty block, never an op. (ETDumps of earlier
# versions carry them as zero-length profile events with that metadata; both are read.)
FINGERPRINT_EVENT = "Program::fingerprint"
FINGERPRINT_PREFIX = b"sha256:"
DEBUG_BUFFER_EVENT = "DebugBuffer::fingerprint"
STAMP_EVENTS = frozenset({FINGERPRINT_EVENT, DEBUG_BUFFER_EVENT})
# Names ExecuTorch's runtime gives its own events and event blocks; the run stage writes them,
# the analysis reads them.
METHOD_EVENT = "Method::execute"
DELEGATE_CALL_EVENT = "DELEGATE_CALL"
LOAD_BLOCK = "Default"  # method load/init
TIMED_BLOCK = "Execute"  # one per execution
CAPTURE_BLOCK = "Execute (intermediate outputs)"  # untimed run that logs intermediate outputs


class ETDumpError(Exception):
    """An ETDump or debug buffer that cannot be read; the message names the file and the problem."""


class ScalarType(IntEnum):
    """ExecuTorch's ScalarType numbering (schema/scalar_type.fbs)."""

    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    BOOL = 11
    BFLOAT16 = 15
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


class ValueType(IntEnum):
    NULL = 0
    INT = 1
    BOOL = 2
    FLOAT = 3
    DOUBLE = 4
    TENSOR = 5
    TENSOR_LIST = 6
    STRING = 7


class TensorRecord(NamedTuple):
    """Where a logged tensor's bytes live in the debug buffer."""

    scalar_type: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


class ValueRecord(NamedTuple):
    """A logged value: one of tensor, tensor list, int, float, double, bool."""

    val: int = ValueType.NULL
    tensor: TensorRecord | None = None
    tensor_list: tuple[TensorRecord, ...] | None = None
    int_value: int | None = None
    float_value: float | None = None
    double_value: float | None = None
    bool_value: bool | None = None
    output: bool | None = None


class ProfileEvent(NamedTuple):
    name: str
    chain_index: int
    instruction_id: int
    delegate_debug_id_int: int
    delegate_debug_id_str: str
    delegate_debug_metadata: bytes
    start_time: int
    end_time: int


class AllocationEvent(NamedTuple):
    allocator_id: int
    allocation_size: int


class DebugEvent(NamedTuple):
    chain_index: int
    instruction_id: int
    debug_entry: ValueRecord | None
    delegate_debug_id_int: int
    delegate_debug_id_str: str
    name: str


class Event(NamedTuple):
    """Exactly one of the three is set."""

    profile_event: ProfileEvent | None = None
    allocation_event: AllocationEvent | None = None
    debug_event: DebugEvent | None = None


@dataclass
class RunData:
    """One event block (ExecuTorch names them 'Default' for load/init and 'Execute' per run)."""

    name: str
    bundled_input_index: int = -1
    allocators: list[str] = field(default_factory=list)
    # A list when built or read at once (`read_etdump`); decoded on each pass from the file when
    # opened with `stages.formats.etdump.streaming.open_etdump`.
    events: Sequence[Event] = field(default_factory=list)


@dataclass
class ETDumpData:
    version: int
    run_data: list[RunData]


def add_stamp(dump: ETDumpData, name: str, sha256: str) -> None:
    """Record a stamp (see FINGERPRINT_EVENT) as an extra allocator name of the first event block.

    Neither an event nor a block of its own: ExecuTorch's Inspector shows no row for it, and its
    `to_dataframe()` fails on an empty event block. Appended after the real allocators, so
    allocation events keep their allocator ids.
    """
    text = f"{name} {FINGERPRINT_PREFIX.decode()}{sha256}"
    if not dump.run_data:
        dump.run_data.append(RunData(name=name, allocators=[text]))
        return
    first = dump.run_data[0]
    dump.run_data[0] = replace(first, allocators=[*first.allocators, text])


def read_stamp(dump: ETDumpData, name: str) -> str | None:
    """The digest a stamp carries: an allocator name, or as earlier versions wrote it (an empty
    block of that name, or a zero-length profile event)."""
    prefix = FINGERPRINT_PREFIX.decode()
    marker = f"{name} {prefix}"
    for block in dump.run_data:
        for text in block.allocators:
            if text.startswith(marker):
                return text[len(marker) :]
        if block.name == name and not block.events and block.allocators:
            text = block.allocators[0]
            if text.startswith(prefix):
                return text[len(prefix) :]
        for event in block.events:
            pe = event.profile_event
            if pe is not None and pe.name == name:
                meta = pe.delegate_debug_metadata
                if meta.startswith(FINGERPRINT_PREFIX):
                    return meta[len(FINGERPRINT_PREFIX) :].decode(errors="replace")
    return None
