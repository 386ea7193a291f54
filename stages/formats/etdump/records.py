"""Typed records of an ETDump, mirroring ExecuTorch's etdump schema (field for field)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

ETDUMP_FILE_IDENTIFIER = b"ED00"
ETDUMP_VERSION = 0
# A zero-length profile event our run stage adds, its metadata the lowered program's sha256, so
# the analysis can tell an ETDump from another program (ExecuTorch's tools see a plain event).
FINGERPRINT_EVENT = "Program::fingerprint"
FINGERPRINT_PREFIX = b"sha256:"
# Likewise, the sha256 of the debug buffer's tensor bytes written with this ETDump: the pair proves
# it belongs together. Neither stamp is a runtime event: tables and traces leave them out.
DEBUG_BUFFER_EVENT = "DebugBuffer::fingerprint"
STAMP_EVENTS = frozenset({FINGERPRINT_EVENT, DEBUG_BUFFER_EVENT})
# Names ExecuTorch's runtime gives its own events and event blocks; the run stage writes them,
# the analysis reads them.
METHOD_EVENT = "Method::execute"
DELEGATE_CALL_EVENT = "DELEGATE_CALL"
LOAD_BLOCK = "Default"  # method load/init
TIMED_BLOCK = "Execute"  # one per execution


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
    events: list[Event] = field(default_factory=list)


@dataclass
class ETDumpData:
    version: int
    run_data: list[RunData]
