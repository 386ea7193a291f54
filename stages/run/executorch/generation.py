"""A generation with ExecuTorch's runtime: its `.pte` run for the prefill and each decode step.

As `executorch_runtime` does for plain runs: one module with ETDump profiling runs every step
(one `Execute` block each, the step as its bundled input index), a second with a debug buffer
repeats the captured steps (the program is a pure function of its inputs), each capture block
holding ExecuTorch's own logged outputs (every instruction's, then the program outputs: logits
and caches). Our layout is then added, as the emulated runtime writes it: each timed block's
next-token logits as a program-output event, its bytes appended to the debug buffer.
"""

from __future__ import annotations

import torch

from stages.formats.etdump import DebugBufferWriter, ETDumpData, RunData
from stages.formats.etdump.records import LOAD_BLOCK, TIMED_BLOCK
from stages.formats.generation_signature import GenerationSignature, greedy_token, next_step_inputs
from stages.run.config import GenerateConfig
from stages.run.executorch.runtime import (
    METHOD,
    ExecuTorchRun,
    _etdump_of,
    _load,
    _logged_values_only,
    _tensors,
    _used_bytes,
    debug_buffer_size,
    output_event,
)
from stages.run.generation import GenerationRun, captures
from stages.run.native_stderr import first_native_call_to_log

Sample = tuple[torch.Tensor, ...]


def _steps(
    module: object, prompt: Sample, steps: int, cfg: GenerateConfig, capture: bool
) -> tuple[GenerationRun, list[torch.Tensor]]:
    """Every step on the timed module; the tokens, captured steps' inputs and each step's logits."""
    run, logits, inputs = GenerationRun(), [], prompt
    for step in range(steps):
        with first_native_call_to_log():
            outputs = _tensors(module.run_method(METHOD, tuple(inputs)))  # type: ignore[attr-defined]
        if capture and captures(step, cfg):
            run.captured.append((step, inputs))
        logits.append(outputs[0][:, -1].contiguous())
        run.tokens.append(greedy_token(outputs[0]))
        inputs = next_step_inputs(inputs, list(outputs), run.tokens[-1])
    return run, logits


def _captured_blocks(
    program: bytes, where: str, captured: list[tuple[int, Sample]]
) -> tuple[list[RunData], DebugBufferWriter]:
    """The captured steps repeated on a module with a debug buffer: one block each (ExecuTorch
    logs every instruction's outputs and the program outputs), and the buffer's used bytes."""
    buffer = DebugBufferWriter()
    if not captured:
        return [], buffer
    size = debug_buffer_size([s for _, s in captured], len(program))
    debug = _load(program, where, debug_buffer_size=size)
    for _, inputs in captured:
        debug.run_method(METHOD, tuple(inputs))
    capture_dump, payload = _etdump_of(debug, debug_buffer=True)
    repeats = [b for b in capture_dump.run_data if b.name == TIMED_BLOCK]
    blocks = [_logged_values_only(b, step) for b, (step, _) in zip(repeats, captured, strict=True)]
    buffer.extend(payload[: _used_bytes(blocks)])
    return blocks, buffer


def run_generation_program(
    program: bytes,
    where: str,
    prompt: Sample,
    signature: GenerationSignature,
    cfg: GenerateConfig,
    warmup: int,
    capture: bool,
) -> tuple[ExecuTorchRun, GenerationRun]:
    """The generation in ExecuTorch's runtime, in our ETDump layout (see the module docstring)."""
    timed = _load(program, where)
    for _ in range(warmup):
        with first_native_call_to_log():  # the runtime's cpuinfo lines: the log file
            timed.run_method(METHOD, tuple(prompt))
    run, logits = _steps(timed, prompt, 1 + cfg.new_tokens, cfg, capture)
    timed_dump, _ = _etdump_of(timed, debug_buffer=False)
    del timed  # its weights: the capture module loads its own
    executions = [b for b in timed_dump.run_data if b.name == TIMED_BLOCK][warmup:]
    blocks = [b for b in timed_dump.run_data if b.name == LOAD_BLOCK]
    captured_blocks, buffer = _captured_blocks(program, where, run.captured)
    for step, (block, step_logits) in enumerate(zip(executions, logits, strict=True)):
        block.bundled_input_index = step
        block.events = [*block.events, output_event(buffer, step_logits)]
    by_step = {b.bundled_input_index: b for b in captured_blocks}
    for block in executions:  # each captured step's repeat just before its timed block
        if block.bundled_input_index in by_step:
            blocks.append(by_step[block.bundled_input_index])
        blocks.append(block)
    dump = ETDumpData(version=0, run_data=blocks)
    return ExecuTorchRun(dump, buffer, [(torch.tensor([run.tokens]),)]), run
