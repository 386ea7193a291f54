"""Config schema of the run stage: the emulated runtime and its event tracer."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class RuntimeName(StrEnum):
    """The runtimes the run stage has (`runtime.name`)."""

    emulated = "emulated"


class DebugLevel(StrEnum):
    """Which tensors the tracer captures (`runtime.debug_level`), as ExecuTorch's log levels."""

    none = "none"
    program_outputs = "program_outputs"
    intermediate_outputs = "intermediate_outputs"


class ProfilingLevel(StrEnum):
    """Which events the tracer times (`runtime.profiling_level`)."""

    all = "all"
    method_only = "method_only"
    none = "none"


@dataclass
class EventFilterConfig:
    """Drop events before they are recorded: by name regex and/or debug-handle range."""

    name_regex: str | None = None
    debug_handle_min: int | None = None
    debug_handle_max: int | None = None


@dataclass
class RuntimeConfig:
    """Warmup and timed iterations, and what the tracer captures."""

    name: RuntimeName = RuntimeName.emulated
    # Untraced executions before the timed ones; the capture executions count toward them.
    warmup: int = 1
    # Timed executions: at most `iterations`, at least `min_iterations`, and no more once they
    # have taken `max_time_s` in all (null: always `iterations`), as pytest-benchmark's rounds.
    iterations: int = 10
    min_iterations: int = 5
    max_time_s: float | None = 1.0
    debug_level: DebugLevel = DebugLevel.intermediate_outputs
    profiling_level: ProfilingLevel = ProfilingLevel.all
    # Allocation events (memory per allocator). ExecuTorch 1.5.1's Inspector raises on them
    # ("Unable to find populated event") though its parser reads them: turn off for its Inspector.
    track_allocations: bool = False  # ExecuTorch 1.5.1's Inspector cannot open them
    filter: EventFilterConfig = field(default_factory=EventFilterConfig)
