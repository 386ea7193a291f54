"""EventTracer: ExecuTorch's tracer operations in Python, recording cheaply, serializing once.

    tracer = EventTracer(debug_level=..., profiling_level=..., event_filter=...)
    tracer.create_event_block("Execute")
    entry = tracer.start_profiling("native_call_add.out", chain_id=0, debug_handle=h, instruction_id=i)
    tracer.end_profiling(entry)
    tracer.write_etdump(etdump_path, debug_buffer_path)

As in ExecuTorch's ETDumpGen, an operator event stores its instruction id; delegate events store
the instruction id of the DELEGATE_CALL they run in, so the analysis can find their partition.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from stages.backends.tracer_protocol import EventTracerDebugLogLevel, EventTracerProfilingLevel
from stages.formats.etdump import (
    AllocationEvent,
    DebugBufferWriter,
    DebugEvent,
    ETDumpData,
    Event,
    ProfileEvent,
    RunData,
    ValueRecord,
    ValueType,
    write_etdump,
)
from stages.formats.etdump.records import (
    DEBUG_BUFFER_EVENT,
    FINGERPRINT_EVENT,
    add_stamp,
)
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier
from stages.handover.debug_buffer import write_debug_buffer

_now = time.perf_counter_ns


class EventTracerError(Exception):
    """The tracer was called in a way ExecuTorch's would reject."""


class SkippedOutput(NamedTuple):
    """An output the tracer did not log (None, a list of ints, ...), and why."""

    debug_handle: DebugHandle
    instruction_id: int
    reason: str


@dataclass(frozen=True)
class EventFilter:
    """Drop events before they are recorded: by name regex and/or debug-handle range."""

    name_regex: str | None = None
    debug_handle_min: int | None = None
    debug_handle_max: int | None = None

    def compiled(self) -> re.Pattern[str] | None:
        return re.compile(self.name_regex) if self.name_regex else None


def _split_identifier(identifier: DelegateIdentifier | None) -> tuple[int, str]:
    if identifier is None:
        return -1, ""
    if isinstance(identifier, bool) or not isinstance(identifier, int | str):
        raise EventTracerError(f"delegate_debug_id {identifier!r} must be an int or a str")
    return (identifier, "") if isinstance(identifier, int) else (-1, identifier)


class EventTracer:
    """Records profiling, debug and allocation events into event blocks; writes one ETDump."""

    def __init__(
        self,
        debug_level: EventTracerDebugLogLevel = EventTracerDebugLogLevel.NO_LOGGING,
        profiling_level: EventTracerProfilingLevel = EventTracerProfilingLevel.PROFILE_ALL_EVENTS,
        event_filter: EventFilter | None = None,
    ) -> None:
        self.debug_level = debug_level
        self.profiling_level = profiling_level
        self._filter = event_filter or EventFilter()
        self._regex = self._filter.compiled()
        self._blocks: list[RunData] = []
        self._events: list[Any] = []
        self._allocators: list[str] = []
        self._buffer = DebugBufferWriter()
        self._program_fingerprint: str | None = None
        self._chain = 0
        self._instruction = -1
        self._instruction_name = ""
        self._bundled_input = -1
        self._open_delegate = 0
        self.skipped_outputs: list[SkippedOutput] = []

    # Blocks -------------------------------------------------------------------------------
    def create_event_block(self, name: str) -> None:
        """Start a new run-data block (ExecuTorch: 'Default' for load, 'Execute' per run)."""
        self._flush()
        self._blocks.append(RunData(name=name, bundled_input_index=self._bundled_input))
        self._events = []

    def set_bundled_input_index(self, index: int) -> None:
        self._bundled_input = index
        if self._blocks:
            self._blocks[-1].bundled_input_index = index

    def _flush(self) -> None:
        if self._blocks:
            block = self._blocks[-1]
            block.events = [*block.events, *(self._convert(e) for e in self._events)]
            self._events = []

    def _keep(self, name: str | None, handle: int | None) -> bool:
        if self._regex is not None and name is not None and not self._regex.search(name):
            return False
        f = self._filter
        if handle is not None and handle > 0:
            if f.debug_handle_min is not None and handle < f.debug_handle_min:
                return False
            if f.debug_handle_max is not None and handle > f.debug_handle_max:
                return False
        return True

    def _require_block(self) -> None:
        if not self._blocks:
            raise EventTracerError(
                "no event block: call create_event_block(name) before logging events"
            )

    # Operator profiling --------------------------------------------------------------------
    def start_profiling(
        self, name: str, chain_id: int = -1, debug_handle: DebugHandle = 0, instruction_id: int = -1
    ) -> list[Any] | None:
        self._chain = chain_id
        self._instruction = instruction_id  # delegate and debug events below belong to it
        self._instruction_name = name  # names its logged outputs (else Inspector shows '')
        if self.profiling_level == EventTracerProfilingLevel.NO_PROFILING:
            return None
        self._require_block()
        if (
            self.profiling_level == EventTracerProfilingLevel.PROFILE_METHOD_ONLY
            and instruction_id >= 0
        ):
            return None
        if not self._keep(name, debug_handle):
            return None
        return [name, chain_id, instruction_id, _now()]

    def end_profiling(self, entry: list[Any] | None) -> None:
        if entry is None:
            return
        if len(entry) != 4:
            raise EventTracerError("end_profiling got an entry that start_profiling did not return")
        self._events.append(("p", entry[0], entry[1], entry[2], -1, "", b"", entry[3], _now()))

    # Delegate profiling --------------------------------------------------------------------
    def start_profiling_delegate(
        self, name: str | None, delegate_debug_id: DelegateIdentifier | None
    ) -> list[Any] | None:
        if name is None and delegate_debug_id is None:
            raise EventTracerError("start_profiling_delegate needs a name or a delegate_debug_id")
        if self.profiling_level != EventTracerProfilingLevel.PROFILE_ALL_EVENTS:
            return None
        self._require_block()
        if not self._keep(name, None):
            return None
        id_int, id_str = _split_identifier(delegate_debug_id)
        return [name or "", id_int, id_str, _now(), "d"]

    def end_profiling_delegate(
        self, entry: list[Any] | None, metadata: bytes | None = None
    ) -> None:
        if entry is None:
            return
        if len(entry) != 5:
            raise EventTracerError(
                "end_profiling_delegate got an entry that start_profiling_delegate did not return"
            )
        self._events.append(
            (
                "p",
                entry[0],
                self._chain,
                self._instruction,
                entry[1],
                entry[2],
                metadata or b"",
                entry[3],
                _now(),
            )
        )

    def log_profiling_delegate(
        self,
        name: str | None,
        delegate_debug_id: DelegateIdentifier | None,
        start_time: int,
        end_time: int,
        metadata: bytes | None = None,
    ) -> None:
        if name is None and delegate_debug_id is None:
            raise EventTracerError("log_profiling_delegate needs a name or a delegate_debug_id")
        if end_time < start_time:
            raise EventTracerError(
                f"log_profiling_delegate: end_time {end_time} is before start_time {start_time}"
            )
        if self.profiling_level != EventTracerProfilingLevel.PROFILE_ALL_EVENTS or not self._keep(
            name, None
        ):
            return
        self._require_block()
        id_int, id_str = _split_identifier(delegate_debug_id)
        self._events.append(
            (
                "p",
                name or "",
                self._chain,
                self._instruction,
                id_int,
                id_str,
                metadata or b"",
                int(start_time),
                int(end_time),
            )
        )

    # Intermediate outputs ------------------------------------------------------------------
    def _value(self, output: Any) -> ValueRecord | str:
        """The ETDump value for `output`, or why it cannot be logged (ExecuTorch's ETDumpGen
        logs Tensor, TensorList, Int, Double and Bool EValues; anything else is skipped)."""
        if isinstance(output, torch.Tensor):
            return ValueRecord(val=ValueType.TENSOR, tensor=self._buffer.append(output))
        if isinstance(output, bool):
            return ValueRecord(val=ValueType.BOOL, bool_value=output)
        if isinstance(output, int):
            return ValueRecord(val=ValueType.INT, int_value=output)
        if isinstance(output, float):
            return ValueRecord(val=ValueType.DOUBLE, double_value=output)
        if isinstance(output, list | tuple):
            if output and all(isinstance(t, torch.Tensor) for t in output):
                return ValueRecord(
                    val=ValueType.TENSOR_LIST,
                    tensor_list=tuple(self._buffer.append(t) for t in output),
                )
            kinds = sorted({type(item).__name__ for item in output}) or ["nothing"]
            return (
                f"a {type(output).__name__} of {'/'.join(kinds)} (ETDump lists hold tensors only)"
            )
        return f"a {type(output).__name__} (ETDump logs Tensor, TensorList, Int, Double, Bool)"

    def _skip(self, debug_handle: DebugHandle, instruction_id: int, reason: str) -> None:
        self.skipped_outputs.append(SkippedOutput(debug_handle, instruction_id, reason))

    def log_intermediate_output(
        self, debug_handle: DebugHandle, instruction_id: int, output: Any
    ) -> None:
        """Log an operator's output; a value ETDump cannot hold is recorded in `skipped_outputs`."""
        if self.debug_level < EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS or not self._keep(
            None, debug_handle
        ):
            return
        self._require_block()
        value = self._value(output)
        if isinstance(value, str):
            self._skip(debug_handle, instruction_id, value)
            return
        name = self._instruction_name if instruction_id == self._instruction else ""
        self._events.append(("g", self._chain, instruction_id, value, -1, "", name))

    def log_intermediate_output_delegate(
        self, name: str | None, delegate_debug_id: DelegateIdentifier | None, output: Any
    ) -> None:
        if name is None and delegate_debug_id is None:
            raise EventTracerError(
                "log_intermediate_output_delegate needs a name or a delegate_debug_id"
            )
        if self.debug_level < EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS:
            return
        self._require_block()
        id_int, id_str = _split_identifier(delegate_debug_id)
        value = self._value(output)
        if isinstance(value, str):
            self._skip(0, self._instruction, f"delegate {delegate_debug_id or name}: {value}")
            return
        self._events.append(
            ("g", self._chain, self._instruction, value, id_int, id_str, name or "")
        )

    def log_program_output(self, output: Any) -> None:
        """One program output, logged at PROGRAM_OUTPUTS level and above (as ExecuTorch's Method
        logs each output EValue); a value ETDump cannot hold is recorded as skipped."""
        if self.debug_level < EventTracerDebugLogLevel.PROGRAM_OUTPUTS:
            return
        self._require_block()
        value = self._value(output)
        if isinstance(value, str):
            self._skip(0, -1, f"program output: {value}")
            return
        self._events.append(
            ("g", self._chain, -1, value._replace(output=True), -1, "", "program_output")
        )

    def log_program_fingerprint(self, fingerprint: str) -> None:
        """The program's sha256, written as a `Program::fingerprint` stamp.

        Wire-compatible (an extra allocator name of the first block, see `records.add_stamp`);
        the analysis uses it to refuse an ETRecord of another program.
        """
        self._program_fingerprint = fingerprint

    # Memory --------------------------------------------------------------------------------
    def track_allocator(self, name: str) -> int:
        self._allocators.append(name)
        if self._blocks:
            self._blocks[-1].allocators = list(self._allocators)
        return len(self._allocators) - 1

    def track_allocation(self, allocator_id: int, size: int) -> None:
        if not 0 <= allocator_id < len(self._allocators):
            raise EventTracerError(
                f"allocator id {allocator_id} was not returned by track_allocator"
            )
        self._require_block()
        self._events.append(("a", allocator_id, size))

    # Output --------------------------------------------------------------------------------
    @staticmethod
    def _convert(raw: tuple[Any, ...]) -> Event:
        kind = raw[0]
        if kind == "p":
            return Event(profile_event=ProfileEvent(*raw[1:]))
        if kind == "a":
            return Event(allocation_event=AllocationEvent(raw[1], raw[2]))
        return Event(debug_event=DebugEvent(raw[1], raw[2], raw[3], raw[4], raw[5], raw[6]))

    def etdump(self) -> ETDumpData:
        self._flush()
        for block in self._blocks:
            block.allocators = block.allocators or list(self._allocators)
        dump = ETDumpData(version=0, run_data=list(self._blocks))
        if self._program_fingerprint:
            add_stamp(dump, FINGERPRINT_EVENT, self._program_fingerprint)
        return dump

    def write_etdump(
        self, etdump_path: Path, debug_buffer_path: Path | None = None
    ) -> tuple[int, int]:
        """Write the ETDump and the debug buffer (only the bytes used); returns their sizes.

        The buffer's trailer names the program; the ETDump carries a `DebugBuffer::fingerprint`
        stamp with the buffer's sha256, so the analysis can pair them.
        """
        dump = self.etdump()
        if debug_buffer_path is not None and dump.run_data:
            add_stamp(dump, DEBUG_BUFFER_EVENT, self._buffer.payload_sha256())
        size = write_etdump(etdump_path, dump)
        debug = (
            write_debug_buffer(self._buffer, debug_buffer_path, self._program_fingerprint)
            if debug_buffer_path is not None
            else 0
        )
        return size, debug
