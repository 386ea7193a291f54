"""Greedy generation under the EventTracer: one prefill execution, then one per decode step.

Each step is one timed execution, its own 'Execute' event block (bundled input index = the step),
with the next-token logits logged as its program output, as ExecuTorch's runner writes several
executions into one ETDump. A step chosen by `runtime.generate.capture_*` is first executed once
more, untimed, in an 'Execute (intermediate outputs)' block: the program is a pure function of
its inputs (the KV cache is an input), so the repeat sees exactly what the timed one does. The
inputs of those steps are kept for the analysis (step_inputs.pt); nothing else grows with steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from stages.backends.fault_injection import generation_step
from stages.backends.tracer_protocol import EventTracerDebugLogLevel, EventTracerProfilingLevel
from stages.formats.etdump.records import CAPTURE_BLOCK, TIMED_BLOCK
from stages.formats.generation_signature import (
    GenerationSignature,
    check_length,
    greedy_token,
    next_step_inputs,
)
from stages.progress_display import ProgressDisplay
from stages.run.config import GenerateConfig
from stages.run.event_tracer import EventTracer
from stages.run.executor import Executor

Sample = tuple[torch.Tensor, ...]


class GenerateOptionError(ValueError):
    """A runtime.generate option out of range; the message names it."""


def check_capture_options(cfg: GenerateConfig) -> None:
    """`runtime.generate.capture_first` and `capture_every` are counts >= 0."""
    if cfg.capture_first is not None and cfg.capture_first < 0:
        raise GenerateOptionError(
            f"runtime.generate.capture_first={cfg.capture_first}: give a count >= 0 of first "
            "steps that capture intermediate outputs, or null for every step"
        )
    if cfg.capture_every < 0:
        raise GenerateOptionError(
            f"runtime.generate.capture_every={cfg.capture_every}: give 0 (no more) or k >= 1 "
            "(every k-th step after the first capture_first also captures)"
        )


def captures(step: int, cfg: GenerateConfig) -> bool:
    """Whether step `step` (0: the prefill) captures intermediate outputs."""
    if cfg.capture_first is None or step < cfg.capture_first:
        return True
    return cfg.capture_every > 0 and step % cfg.capture_every == 0


@dataclass
class GenerationRun:
    """The token each step chose, and the inputs of the steps that captured (step, inputs)."""

    tokens: list[int] = field(default_factory=list)
    captured: list[tuple[int, Sample]] = field(default_factory=list)


def _capture_step(
    executor: Executor,
    inputs: Sample,
    step: int,
    level: EventTracerDebugLogLevel,
    tracer: EventTracer,
) -> None:
    """An untimed execution of the step that logs its intermediate and program outputs."""
    levels = tracer.debug_level, tracer.profiling_level
    tracer.debug_level, tracer.profiling_level = level, EventTracerProfilingLevel.NO_PROFILING
    tracer.create_event_block(CAPTURE_BLOCK)
    tracer.set_bundled_input_index(step)
    for value in executor.execute(inputs, tracer):
        tracer.log_program_output(value)
    tracer.debug_level, tracer.profiling_level = levels


def _timed_step(
    executor: Executor, inputs: Sample, step: int, log_logits: bool, tracer: EventTracer
) -> list[torch.Tensor]:
    """The timed execution of the step; its next-token logits as the block's program output."""
    tracer.create_event_block(TIMED_BLOCK)
    tracer.set_bundled_input_index(step)
    outputs = list(executor.execute(inputs, tracer))
    if log_logits:
        level = tracer.debug_level
        tracer.debug_level = EventTracerDebugLogLevel.PROGRAM_OUTPUTS
        tracer.log_program_output(outputs[0][:, -1].contiguous())
        tracer.debug_level = level
    return outputs


def generate(
    executor: Executor,
    prompt: Sample,
    signature: GenerationSignature,
    cfg: GenerateConfig,
    level: EventTracerDebugLogLevel,
    tracer: EventTracer,
) -> GenerationRun:
    """Prefill `prompt`, then `cfg.new_tokens` greedy decode steps."""
    problem = check_length(signature.prompt_tokens, cfg.new_tokens, signature.max_len)
    if problem:
        raise GenerateOptionError(problem)
    run = GenerationRun()
    inputs = prompt
    capture = level >= EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS
    steps = 1 + cfg.new_tokens
    with ProgressDisplay("generate", steps) as progress:
        for step in range(steps):
            with generation_step(step):
                if capture and captures(step, cfg):
                    _capture_step(executor, inputs, step, level, tracer)
                    run.captured.append((step, inputs))
                log_logits = level >= EventTracerDebugLogLevel.PROGRAM_OUTPUTS
                outputs = _timed_step(executor, inputs, step, log_logits, tracer)
            token = greedy_token(outputs[0])
            run.tokens.append(token)
            inputs = next_step_inputs(inputs, outputs, token)
            progress.advance()
    return run


def step_input_samples(run: GenerationRun) -> list[Sample]:
    """step_inputs.pt's samples: (step as a 0-d int64 tensor, *that step's inputs) each."""
    return [(torch.tensor(step, dtype=torch.int64), *inputs) for step, inputs in run.captured]
