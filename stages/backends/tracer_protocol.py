"""EventTracerProtocol: the tracer surface the executor and delegate backends call.

Mirrors ExecuTorch's C++ EventTracer. The run stage's `EventTracer` (stages/run/event_tracer.py,
ExecuTorch's name) is the implementation; backends and the executor depend only on this protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any, Protocol

import torch

from stages.handles.debug_handles import DebugHandle, DelegateIdentifier


class EventTracerDebugLogLevel(IntEnum):
    """What the tracer captures besides timings (ExecuTorch's EventTracerDebugLogLevel)."""

    NO_LOGGING = 0
    PROGRAM_OUTPUTS = 1
    INTERMEDIATE_OUTPUTS = 2


class EventTracerProfilingLevel(IntEnum):
    """Which profiling events the tracer records."""

    NO_PROFILING = 0
    PROFILE_ALL_EVENTS = 1
    PROFILE_METHOD_ONLY = 2


# Handle returned by a start_* call and handed back to the matching end_* call (None: dropped).
EventTracerEntry = Any


TensorOrTensors = torch.Tensor | Sequence[torch.Tensor]


class EventTracerProtocol(Protocol):
    """Operations the executor and delegates call while a method executes."""

    debug_level: EventTracerDebugLogLevel
    profiling_level: EventTracerProfilingLevel

    def create_event_block(self, name: str) -> None: ...
    def set_bundled_input_index(self, index: int) -> None: ...

    # Operator (and method) profiling.
    def start_profiling(
        self,
        name: str,
        chain_id: int = -1,
        debug_handle: DebugHandle = 0,
        instruction_id: int = -1,
    ) -> EventTracerEntry: ...
    def end_profiling(self, entry: EventTracerEntry) -> None: ...

    # Delegate profiling, real-time and post-time.
    def start_profiling_delegate(
        self, name: str | None, delegate_debug_id: DelegateIdentifier | None
    ) -> EventTracerEntry: ...
    def end_profiling_delegate(
        self, entry: EventTracerEntry, metadata: bytes | None = None
    ) -> None: ...
    def log_profiling_delegate(
        self,
        name: str | None,
        delegate_debug_id: DelegateIdentifier | None,
        start_time: int,
        end_time: int,
        metadata: bytes | None = None,
    ) -> None: ...

    # Intermediate outputs.
    def log_intermediate_output(
        self, debug_handle: DebugHandle, instruction_id: int, output: Any
    ) -> None: ...
    def log_intermediate_output_delegate(
        self,
        name: str | None,
        delegate_debug_id: DelegateIdentifier | None,
        output: TensorOrTensors,
    ) -> None: ...

    # Memory.
    def track_allocator(self, name: str) -> int: ...
    def track_allocation(self, allocator_id: int, size: int) -> None: ...
