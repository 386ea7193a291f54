"""The run stage: execute the lowered program under the EventTracer, write ETDump + debug buffer.

Intermediate outputs are captured in executions of their own ('Execute (intermediate outputs)'
blocks), which also warm the program up; the timed ones after them ('Execute' blocks) capture no
tensors, so latencies are not inflated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from stages.backends.tracer_protocol import EventTracerDebugLogLevel, EventTracerProfilingLevel
from stages.formats.artifacts import ArtifactName
from stages.formats.etdump import ETDumpData
from stages.formats.etdump.records import CAPTURE_BLOCK, LOAD_BLOCK, METHOD_EVENT, TIMED_BLOCK
from stages.formats.executorch.program import is_executorch_program
from stages.formats.generation_signature import check_length, load_signature
from stages.handover.lowered_program import holds_saved, load_program
from stages.handover.samples import load_samples, save_samples
from stages.progress_display import ProgressDisplay
from stages.run.config import RuntimeConfig
from stages.run.event_tracer import EventFilter, EventTracer
from stages.run.executor import Executor
from stages.run.generation import check_capture_options, generate, step_input_samples
from stages.run.iteration_budget import IterationBudget, IterationBudgetError
from stages.safe_io.file_digests import file_sha256

log = logging.getLogger(__name__)

_DEBUG_LEVELS = {
    "none": EventTracerDebugLogLevel.NO_LOGGING,
    "program_outputs": EventTracerDebugLogLevel.PROGRAM_OUTPUTS,
    "intermediate_outputs": EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS,
}
_PROFILING_LEVELS = {
    "all": EventTracerProfilingLevel.PROFILE_ALL_EVENTS,
    "method_only": EventTracerProfilingLevel.PROFILE_METHOD_ONLY,
    "none": EventTracerProfilingLevel.NO_PROFILING,
}


class RuntimeConfigError(ValueError):
    """A runtime option with a value the emulated runtime does not know."""


@dataclass(frozen=True)
class RunArtifacts:
    """Files the run stage wrote, plus its metrics."""

    etdump: Path
    debug_buffer: Path
    outputs: Path
    metrics: dict[str, float] = field(default_factory=dict)
    step_inputs: Path | None = None  # a generation's captured steps' inputs
    # runtime.observe=tap: what instrumentation changed, which tapped values were refused.
    instrumentation: Path | None = None


def _level(table: Mapping[str, int], value: str, option: str) -> int:
    if value not in table:
        raise RuntimeConfigError(f"{option}={value!r}: choose one of {sorted(table)}")
    return table[value]


def _report_skipped(tracer: EventTracer) -> None:
    """One log line for outputs the ETDump cannot hold (None from `_assert_tensor_metadata`, ...)."""
    reasons: dict[str, list[int]] = {}
    for skipped in tracer.skipped_outputs:
        reasons.setdefault(skipped.reason, []).append(skipped.debug_handle)
    if reasons:
        log.info(
            "[run] %d outputs not logged: %s",
            len(tracer.skipped_outputs),
            "; ".join(f"{why} (debug handles {sorted(set(h))})" for why, h in reasons.items()),
        )


def _load_traced(program: Path, runtime: RuntimeConfig, tracer: EventTracer) -> Executor:
    """Load the program inside the load block, stamp its fingerprint, log its allocations."""
    tracer.create_event_block(LOAD_BLOCK)
    entry = tracer.start_profiling("Program::load_method", -1, 0, -1)
    lowered = load_program(program)
    executor = Executor(lowered)
    tracer.end_profiling(entry)
    tracer.log_program_fingerprint(file_sha256(program))
    if runtime.track_allocations:
        constants_allocator = tracer.track_allocator("constants")
        delegate_allocator = tracer.track_allocator("delegates")
        tracer.track_allocation(
            constants_allocator,
            sum(t.numel() * t.element_size() for t in lowered.constant_tensors.values()),
        )
        for blob in lowered.delegate_blobs.values():
            tracer.track_allocation(delegate_allocator, len(blob))
        for named in lowered.named_data.values():  # what the delegates' bytes refer to
            tracer.track_allocation(delegate_allocator, named.nbytes)
    return executor


def _timed_iterations(
    executor: Executor,
    samples: list[tuple[torch.Tensor, ...]],
    runtime: RuntimeConfig,
    tracer: EventTracer,
    warmed: int,
) -> IterationBudget:
    """Warm-up executions untraced (those `warmed` already count), then one profiled event
    block per timed execution, as many as the iteration budget allows."""
    for index in range(max(0, runtime.warmup - warmed)):
        executor.execute(samples[index % len(samples)])
    budget = _budget(runtime)
    with ProgressDisplay("run", runtime.iterations) as progress:
        while budget.more():
            index = budget.done
            tracer.create_event_block(TIMED_BLOCK)
            tracer.set_bundled_input_index(index % len(samples))
            started = time.perf_counter()
            executor.execute(samples[index % len(samples)], tracer)
            budget.record(time.perf_counter() - started)
            progress.advance()
    return budget


def _budget(runtime: RuntimeConfig) -> IterationBudget:
    return IterationBudget(runtime.iterations, runtime.min_iterations, runtime.max_time_s)


def _capture(
    executor: Executor,
    samples: list[tuple[torch.Tensor, ...]],
    debug_level: EventTracerDebugLogLevel,
    tracer: EventTracer,
) -> list[tuple[Any, ...]]:
    """One untimed execution per sample that logs intermediate and program outputs (a block
    each); the program's outputs. With nothing to log, plain executions."""
    if debug_level <= EventTracerDebugLogLevel.NO_LOGGING:
        return [tuple(executor.execute(sample)) for sample in samples]
    levels = tracer.debug_level, tracer.profiling_level
    tracer.debug_level = debug_level
    tracer.profiling_level = EventTracerProfilingLevel.NO_PROFILING
    outputs = []
    for index, sample in enumerate(samples):
        tracer.create_event_block(CAPTURE_BLOCK)
        tracer.set_bundled_input_index(index)
        values = tuple(executor.execute(sample, tracer))
        for value in values:
            tracer.log_program_output(value)
        outputs.append(values)
    tracer.debug_level, tracer.profiling_level = levels
    return outputs


def _check_budget(runtime: RuntimeConfig) -> None:
    """runtime.warmup and the iteration budget, checked before anything runs."""
    if runtime.warmup < 0:
        raise RuntimeConfigError(f"runtime.warmup={runtime.warmup}: give 0 or more")
    try:
        _budget(runtime)
    except IterationBudgetError as exc:
        raise RuntimeConfigError(str(exc)) from exc


def run_run(
    runtime: RuntimeConfig,
    program: Path,
    inputs: Path,
    run_dir: Path,
    generation: Path | None = None,
    taps: tuple[Path, ...] = (),
) -> RunArtifacts:
    """Warm up, time, capture intermediates apart (generation.json: generate; `taps`: tap)."""
    debug_level = EventTracerDebugLogLevel(
        _level(_DEBUG_LEVELS, runtime.debug_level, "runtime.debug_level")
    )
    profiling = EventTracerProfilingLevel(
        _level(_PROFILING_LEVELS, runtime.profiling_level, "runtime.profiling_level")
    )
    _check_budget(runtime)
    samples = load_samples(inputs)
    if not holds_saved(program):  # a program the lower stage just wrote is this tool's
        with program.open("rb") as fh:
            if is_executorch_program(fh.read(8)):  # the runtime plug-in the backend chose
                if generation is not None:
                    return _generate_executorch(runtime, debug_level, program, samples, generation)
                return _run_executorch(runtime, debug_level, program, samples, run_dir, taps)
    tracer = EventTracer(
        debug_level=EventTracerDebugLogLevel.NO_LOGGING,
        profiling_level=profiling,
        event_filter=EventFilter(
            runtime.filter.name_regex,
            runtime.filter.debug_handle_min,
            runtime.filter.debug_handle_max,
        ),
    )
    executor = _load_traced(program, runtime, tracer)
    if generation is not None:
        return _run_generation(
            runtime, debug_level, executor, samples[0], generation, tracer, run_dir
        )
    # The capture executions come first and are the warm-up: the kernels, caches and allocator
    # are as warm after them as after an untraced execution, and the timed ones log no tensor.
    outputs = _capture(executor, samples, debug_level, tracer)
    budget = _timed_iterations(executor, samples, runtime, tracer, warmed=len(samples))
    _report_skipped(tracer)

    etdump_path = run_dir / ArtifactName.ETDUMP
    debug_path = run_dir / ArtifactName.DEBUG_BUFFER
    data = tracer.etdump()
    etdump_bytes, debug_bytes = tracer.write_etdump(etdump_path, debug_path)
    outputs_path = run_dir / ArtifactName.RUN_OUTPUTS
    save_samples(
        [tuple(t for t in o if isinstance(t, torch.Tensor)) for o in outputs], outputs_path
    )
    metrics = _metrics(budget.done, data, etdump_bytes, debug_bytes)
    metrics["skipped_outputs"] = float(len(tracer.skipped_outputs))
    return RunArtifacts(
        etdump=etdump_path, debug_buffer=debug_path, outputs=outputs_path, metrics=metrics
    )


def _metrics(
    iterations: int, data: ETDumpData, etdump_bytes: int, debug_bytes: int
) -> dict[str, float]:
    """Iterations, file sizes, event count and the timed executions' latency quantiles."""
    method_ms = [
        (e.profile_event.end_time - e.profile_event.start_time) / 1e6
        for block in data.run_data
        if block.name == TIMED_BLOCK
        for e in block.events
        if e.profile_event is not None and e.profile_event.name == METHOD_EVENT
    ]
    metrics = {
        "iterations": float(iterations),
        "etdump_bytes": float(etdump_bytes),
        "debug_buffer_bytes": float(debug_bytes),
        "events": float(sum(len(b.events) for b in data.run_data)),
    }
    if method_ms:
        metrics |= {
            # p50/p90 of the same method events are analyze.latency_p50_ms/_p90_ms (one name each)
            "latency_min_ms": min(method_ms),
        }
    return metrics


def _run_executorch(
    runtime: RuntimeConfig,
    debug_level: EventTracerDebugLogLevel,
    program: Path,
    samples: list[tuple[torch.Tensor, ...]],
    run_dir: Path,
    taps: tuple[Path, ...] = (),
) -> RunArtifacts:
    """ExecuTorch's .pte in ExecuTorch's runtime, written in the same layout as ours."""
    from stages.run.executorch.runtime import run_program, write_run
    from stages.run.executorch.taps import add_taps

    data = program.read_bytes()
    capture = debug_level >= EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS
    budget = _budget(runtime)
    log_outputs = debug_level >= EventTracerDebugLogLevel.PROGRAM_OUTPUTS
    run = run_program(data, str(program), samples, runtime.warmup, budget, capture, log_outputs)
    instrumentation = None
    if len(taps) == 2 and capture:
        instrumentation = run_dir / ArtifactName.INSTRUMENTATION
        run = add_taps(run, taps[0], taps[1], samples, instrumentation)
    etdump_path = run_dir / ArtifactName.ETDUMP
    debug_path = run_dir / ArtifactName.DEBUG_BUFFER
    etdump_bytes = write_run(run, data, etdump_path, debug_path)
    outputs_path = run_dir / ArtifactName.RUN_OUTPUTS
    save_samples(run.outputs, outputs_path)
    metrics = _metrics(budget.done, run.etdump, etdump_bytes, debug_path.stat().st_size)
    return RunArtifacts(
        etdump_path, debug_path, outputs_path, metrics=metrics, instrumentation=instrumentation
    )


def _run_generation(
    runtime: RuntimeConfig,
    debug_level: EventTracerDebugLogLevel,
    executor: Executor,
    prompt: tuple[torch.Tensor, ...],
    generation: Path,
    tracer: EventTracer,
    run_dir: Path,
) -> RunArtifacts:
    """Warm-up prefills untraced, then the generation; the ETDump, debug buffer, the generated
    tokens (run_outputs.pt) and the captured steps' inputs (step_inputs.pt)."""
    check_capture_options(runtime.generate)
    signature = load_signature(generation)
    for _ in range(runtime.warmup):
        executor.execute(prompt)
    run = generate(executor, prompt, signature, runtime.generate, debug_level, tracer)
    _report_skipped(tracer)
    etdump_path, debug_path = run_dir / ArtifactName.ETDUMP, run_dir / ArtifactName.DEBUG_BUFFER
    data = tracer.etdump()
    etdump_bytes, debug_bytes = tracer.write_etdump(etdump_path, debug_path)
    outputs_path = run_dir / ArtifactName.RUN_OUTPUTS
    save_samples([(torch.tensor([run.tokens], dtype=torch.int64),)], outputs_path)
    save_samples(step_input_samples(run), run_dir / ArtifactName.STEP_INPUTS)
    metrics = _metrics(len(run.tokens), data, etdump_bytes, debug_bytes)
    metrics["captured_steps"] = float(len(run.captured))
    return RunArtifacts(
        etdump_path,
        debug_path,
        outputs_path,
        metrics=metrics,
        step_inputs=run_dir / ArtifactName.STEP_INPUTS,
    )


def _generate_executorch(
    runtime: RuntimeConfig,
    debug_level: EventTracerDebugLogLevel,
    program: Path,
    samples: list[tuple[torch.Tensor, ...]],
    generation: Path,
) -> RunArtifacts:
    """A generation in ExecuTorch's runtime (stages.run.executorch.generation), our layout."""
    from stages.run.executorch.generation import run_generation_program
    from stages.run.executorch.runtime import write_run

    check_capture_options(runtime.generate)
    signature = load_signature(generation)
    problem = check_length(signature.prompt_tokens, runtime.generate.new_tokens, signature.max_len)
    if problem:
        raise RuntimeConfigError(problem)
    data, run_dir = program.read_bytes(), generation.parent
    capture = debug_level >= EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS
    run, steps = run_generation_program(
        data, str(program), samples[0], signature, runtime.generate, runtime.warmup, capture
    )
    etdump_path, debug_path = run_dir / ArtifactName.ETDUMP, run_dir / ArtifactName.DEBUG_BUFFER
    etdump_bytes = write_run(run, data, etdump_path, debug_path)
    outputs_path = run_dir / ArtifactName.RUN_OUTPUTS
    save_samples(run.outputs, outputs_path)
    save_samples(step_input_samples(steps), run_dir / ArtifactName.STEP_INPUTS)
    metrics = _metrics(len(steps.tokens), run.etdump, etdump_bytes, debug_path.stat().st_size)
    metrics["captured_steps"] = float(len(steps.captured))
    return RunArtifacts(
        etdump_path, debug_path, outputs_path, metrics, run_dir / ArtifactName.STEP_INPUTS
    )
