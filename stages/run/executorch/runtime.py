"""The run stage's ExecuTorch runtime plug-in: ExecuTorch's `.pte` run by ExecuTorch's runtime.

As ExecuTorch needs it: one module with ETDump profiling for the warm-up and timed iterations,
and a second with a debug buffer for one capture run per representative input (intermediate
outputs). Their ETDumps are merged into our layout — `Default`, one `Execute` block per timed
iteration, `Execute (intermediate outputs)` blocks with only the logged values — plus our
program and debug-buffer stamps. Needs the executorch extra.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from stages.formats.etdump import (
    DebugBufferWriter,
    DebugEvent,
    ETDumpData,
    Event,
    RunData,
    read_etdump,
)
from stages.formats.etdump.records import (
    CAPTURE_BLOCK,
    DEBUG_BUFFER_EVENT,
    FINGERPRINT_EVENT,
    LOAD_BLOCK,
    TIMED_BLOCK,
    ValueRecord,
    ValueType,
    add_stamp,
)
from stages.formats.etdump.writer import write_etdump
from stages.handover.debug_buffer import write_debug_buffer
from stages.progress_display import ProgressDisplay
from stages.run.iteration_budget import IterationBudget
from stages.run.native_stderr import first_native_call_to_log, native_stderr_to_log

log = logging.getLogger(__name__)
EXECUTORCH_EXTRA = "pip install -e '.[executorch]'"
METHOD = "forward"
_DEBUG_SLACK = 1 << 20  # ExecuTorch aligns each logged tensor; generous room on top
_ALIGN = 64  # the alignment a chunk's payload starts at when chunks are joined
CAPTURE_CHUNK_BYTES = 256 << 20  # one debug buffer's bytes, beyond the first sample's


class ExecuTorchRuntimeError(Exception):
    """ExecuTorch's runtime is missing or refused the program; the message says what to do."""


@dataclass(frozen=True)
class ExecuTorchRun:
    """What one ExecuTorch run produced, in our ETDump layout."""

    etdump: ETDumpData
    debug_buffer: DebugBufferWriter  # ExecuTorch's payload (and any tensors logged after it)
    outputs: list[tuple[torch.Tensor, ...]]


def _loader() -> Any:
    try:
        from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer
    except ImportError as exc:
        raise ExecuTorchRuntimeError(
            f"this program is ExecuTorch's .pte; running it needs ExecuTorch: {EXECUTORCH_EXTRA}"
        ) from exc
    return _load_for_executorch_from_buffer


def _load(program: bytes, where: str, **options: Any) -> Any:
    try:
        with native_stderr_to_log():  # the runtime's cpuinfo lines: the log file, not the terminal
            return _loader()(program, enable_etdump=True, **options)
    except RuntimeError as exc:
        raise ExecuTorchRuntimeError(f"ExecuTorch could not load {where}: {exc}") from exc


def load_module(program: bytes, where: str) -> Any:
    """ExecuTorch's runtime module of `program` (no debug buffer)."""
    return _load(program, where)


def _etdump_of(module: Any, debug_buffer: bool) -> tuple[ETDumpData, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        dump, buffer = Path(tmp) / "etdump.etdp", Path(tmp) / "debug.bin"
        module.write_etdump_result_to_file(str(dump), str(buffer) if debug_buffer else None)
        return read_etdump(dump), buffer.read_bytes() if debug_buffer else b""


def debug_buffer_size(samples: list[tuple[torch.Tensor, ...]], program_bytes: int) -> int:
    """Room for every intermediate output: a bound from the program and the inputs' sizes."""
    biggest = max(sum(t.numel() * t.element_size() for t in s) for s in samples)
    return 64 * (program_bytes + biggest) + _DEBUG_SLACK


def _capture_chunk(
    program: bytes, where: str, samples: list[tuple[torch.Tensor, ...]], first: int, size: int
) -> tuple[list[RunData], bytes, list[tuple[torch.Tensor, ...]]]:
    """One module with a debug buffer of `size` bytes runs `samples` (numbered from `first`):
    their capture blocks, the buffer's used bytes and the program outputs."""
    debug = _load(program, where, debug_buffer_size=size)
    outputs = []
    with ProgressDisplay(
        f"run: capture samples {first}-{first + len(samples) - 1}", len(samples)
    ) as progress:
        for sample in samples:
            with first_native_call_to_log():
                outputs.append(_tensors(debug.run_method(METHOD, tuple(sample))))
            progress.advance()
    capture_dump, payload = _etdump_of(debug, debug_buffer=True)
    captures = [b for b in capture_dump.run_data if b.name == TIMED_BLOCK]
    blocks = [_logged_values_only(b, first + i) for i, b in enumerate(captures)]
    return blocks, payload[: _used_bytes(blocks)], outputs


def _sample_bytes(sample: tuple[torch.Tensor, ...]) -> int:
    return sum(t.numel() * t.element_size() for t in sample)


def _capture(
    program: bytes, where: str, samples: list[tuple[torch.Tensor, ...]]
) -> tuple[list[RunData], bytes, list[tuple[torch.Tensor, ...]]]:
    """One capture run per sample. ExecuTorch aborts the process when its debug buffer fills, so
    the first sample runs alone under a generous bound and the bytes it logged size the buffers
    of the rest, taken in chunks of at most CAPTURE_CHUNK_BYTES (scaled by each sample's input
    size, for programs whose shapes vary); the chunks' tensors are rebased into one payload."""
    blocks, payload, outputs = _capture_chunk(
        program, where, samples[:1], 0, debug_buffer_size(samples[:1], len(program))
    )
    logged, base = max(len(payload), 1), max(_sample_bytes(samples[0]), 1)
    start = 1
    while start < len(samples):
        chunk: list[tuple[torch.Tensor, ...]] = []
        room = _DEBUG_SLACK
        for sample in samples[start:]:
            need = int(logged * max(1.0, _sample_bytes(sample) / base) * 1.25) + _ALIGN
            if chunk and room + need > CAPTURE_CHUNK_BYTES:
                break
            chunk.append(sample)
            room += need
        more, more_payload, more_outputs = _capture_chunk(program, where, chunk, start, room)
        offset = -(-len(payload) // _ALIGN) * _ALIGN  # ExecuTorch's alignment kept
        payload = payload + bytes(offset - len(payload)) + more_payload
        blocks += [_rebased(block, offset) for block in more]
        outputs += more_outputs
        start += len(chunk)
    return blocks, payload, outputs


def _rebased(block: RunData, delta: int) -> RunData:
    """`block` with its logged tensors' offsets moved by `delta` bytes into a joined payload."""
    events = []
    for event in block.events:
        de = event.debug_event
        value = de.debug_entry if de is not None else None
        if de is None or value is None:
            events.append(event)
            continue
        tensor = value.tensor._replace(offset=value.tensor.offset + delta) if value.tensor else None
        listed = value.tensor_list
        if listed is not None:
            listed = tuple(t._replace(offset=t.offset + delta) for t in listed)
        moved = value._replace(tensor=tensor, tensor_list=listed)
        events.append(Event(debug_event=de._replace(debug_entry=moved)))
    return RunData(block.name, block.bundled_input_index, list(block.allocators), events)


def run_program(
    program: bytes,
    where: str,
    samples: list[tuple[torch.Tensor, ...]],
    warmup: int,
    budget: IterationBudget,
    capture: bool,
    log_outputs: bool = True,
) -> ExecuTorchRun:
    """Timed iterations (as many as `budget` allows), then (if `capture`) one capture run per
    sample with a debug buffer. Without a capture, `log_outputs` logs each sample's program
    outputs in a block of its own, as a capture would (the accuracy and task need them)."""
    timed = _load(program, where)
    samples = as_program_inputs(timed, samples)
    if capture and takes_half(timed):
        log.warning(
            "[run] not capturing intermediate outputs: this program computes in half precision "
            "and ExecuTorch 1.5.1's ETDump cannot log half tensors (it writes a corrupt file); "
            "timings and final outputs only"
        )
        capture = False
    outputs: list[tuple[torch.Tensor, ...]] = []
    for index in range(warmup):
        with first_native_call_to_log():  # the runtime reads the CPU's details on its first call
            timed.run_method(METHOD, tuple(samples[index % len(samples)]))
    with ProgressDisplay("run", budget.iterations) as progress:
        while budget.more():
            with first_native_call_to_log():  # no warm-up (a search's trials): the first one
                started = time.perf_counter()
                timed.run_method(METHOD, tuple(samples[budget.done % len(samples)]))
                elapsed = time.perf_counter() - started
            budget.record(elapsed)
            progress.advance()
    timed_dump, _ = _etdump_of(timed, debug_buffer=False)
    executions = [b for b in timed_dump.run_data if b.name == TIMED_BLOCK]
    blocks = [b for b in timed_dump.run_data if b.name == LOAD_BLOCK]
    for index, block in enumerate(executions[warmup:]):
        block.bundled_input_index = index % len(samples)
        blocks.append(block)
    payload = b""
    if capture:
        captured, payload, outputs = _capture(program, where, samples)
        blocks += captured
    else:
        outputs = [_tensors(timed.run_method(METHOD, tuple(s))) for s in samples]
    buffer = DebugBufferWriter()
    buffer.extend(payload)
    if not capture and log_outputs:
        for index, sample_outputs in enumerate(outputs):
            events = [output_event(buffer, t) for t in sample_outputs]
            blocks.append(RunData(CAPTURE_BLOCK, index, [], events))
    return ExecuTorchRun(ETDumpData(version=0, run_data=blocks), buffer, outputs)


def output_event(buffer: DebugBufferWriter, tensor: torch.Tensor) -> Event:
    """A program output logged as ExecuTorch's Method logs one (instruction -1, `output`)."""
    record = ValueRecord(val=ValueType.TENSOR, tensor=buffer.append(tensor), output=True)
    return Event(debug_event=DebugEvent(0, -1, record, -1, "", "program_output"))


# ExecuTorch's ScalarType codes of the float dtypes a program's inputs may have.
_HALF_SCALAR_TYPE = 5
_FLOAT_SCALAR_TYPES = {_HALF_SCALAR_TYPE: torch.float16, 6: torch.float32, 15: torch.bfloat16}


def takes_half(module: Any) -> bool:
    """True when the program's method takes or returns half tensors (an fp16 program)."""
    meta = module.method_meta(METHOD)
    metas = [meta.input_tensor_meta(i) for i in range(meta.num_inputs())]
    metas += [meta.output_tensor_meta(i) for i in range(meta.num_outputs())]
    return any(int(m.dtype()) == _HALF_SCALAR_TYPE for m in metas)


def as_program_inputs(
    module: Any, samples: list[tuple[torch.Tensor, ...]]
) -> list[tuple[torch.Tensor, ...]]:
    """Float inputs cast to the float dtype the program's method takes (a half program's inputs
    in half); other inputs as they are."""
    meta = module.method_meta(METHOD)
    wanted: list[torch.dtype | None] = []
    for index in range(meta.num_inputs()):
        try:
            wanted.append(_FLOAT_SCALAR_TYPES.get(int(meta.input_tensor_meta(index).dtype())))
        except RuntimeError:  # a non-tensor input
            wanted.append(None)
    return [
        tuple(
            t.to(dtype) if dtype is not None and t.is_floating_point() else t
            for t, dtype in zip(sample, [*wanted, *[None] * len(sample)], strict=False)
        )
        for sample in samples
    ]


def _logged_values_only(block: RunData, sample: int) -> RunData:

    events = [Event(debug_event=e.debug_event) for e in block.events if e.debug_event is not None]
    return RunData(CAPTURE_BLOCK, sample, list(block.allocators), events)


def _used_bytes(blocks: list[RunData]) -> int:
    from stages.formats.etdump.debug_buffer import tensor_nbytes

    end = 0
    for block in blocks:
        for event in block.events:
            value = event.debug_event.debug_entry if event.debug_event is not None else None
            tensors = [] if value is None else [value.tensor, *(value.tensor_list or ())]
            for t in tensors:
                if t is not None and (n := tensor_nbytes(t)) is not None:
                    end = max(end, t.offset + n)
    return end


def write_run(run: ExecuTorchRun, program: bytes, etdump_path: Path, debug_path: Path) -> int:
    """Our ETDump (with the program and debug-buffer stamps) and debug buffer (with trailer)."""
    fingerprint = hashlib.sha256(program).hexdigest()
    buffer = run.debug_buffer
    add_stamp(run.etdump, FINGERPRINT_EVENT, fingerprint)
    add_stamp(run.etdump, DEBUG_BUFFER_EVENT, buffer.payload_sha256())
    size = write_etdump(etdump_path, run.etdump)
    write_debug_buffer(buffer, debug_path, fingerprint)
    return size


def _tensors(result: Any) -> tuple[torch.Tensor, ...]:
    return tuple(t for t in result if isinstance(t, torch.Tensor))
