"""Config schema of the run stage: the emulated runtime and its event tracer."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from stages.closed_sets import ObserveMode


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
class GenerateConfig:
    """Greedy generation (off while `prompt_tokens` is null): one prefill execution of the
    prompt, then `new_tokens` decode executions of the same program, each its own event block.
    Intermediate outputs are captured in the first `capture_first` steps (null: every step) and
    every `capture_every`-th step after them (0: none); every step keeps its timings."""

    prompt_tokens: int | None = None
    new_tokens: int = 8
    # The KV cache's length for a Hugging Face causal LM (default: its max_position_embeddings);
    # the zoo llm's is model.kwargs.seq_len.
    max_len: int | None = None
    capture_first: int | None = None
    capture_every: int = 0


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
    # Values inside an executorch_* backend's delegates: `tap` instruments the program so they
    # come back as extra program outputs (docs/executorch_interop.md); `off`: what it logs.
    observe: ObserveMode = ObserveMode.off
    generate: GenerateConfig = field(default_factory=GenerateConfig)
