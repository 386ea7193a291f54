"""Config schema of the run stage: the emulated runtime and its event tracer."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EventFilterConfig:
    """Drop events before they are recorded: by name regex and/or debug-handle range."""

    name_regex: str | None = None
    debug_handle_min: int | None = None
    debug_handle_max: int | None = None


@dataclass
class RuntimeConfig:
    """Warmup and timed iterations, and what the tracer captures."""

    name: str = "emulated"
    warmup: int = 1
    iterations: int = 10
    debug_level: str = "intermediate_outputs"
    profiling_level: str = "all"
    # Allocation events (memory per allocator). ExecuTorch 1.5.1's Inspector raises on them
    # ("Unable to find populated event") though its parser reads them: turn off for its Inspector.
    track_allocations: bool = False  # ExecuTorch 1.5.1's Inspector cannot open them
    filter: EventFilterConfig = field(default_factory=EventFilterConfig)
