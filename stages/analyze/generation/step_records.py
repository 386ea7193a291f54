"""What an ETDump says about each step of a generation: its timed latency, its next-token
logits (the timed block's program output), and, for captured steps, its program outputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from stages.formats.etdump import ETDumpData, RunData, TensorRecord, tensor_from_buffer
from stages.formats.etdump.records import CAPTURE_BLOCK, METHOD_EVENT, TIMED_BLOCK


@dataclass
class StepRecords:
    """Per step: latency (ms), the logits' tensor record, the capture block, and its program
    outputs' records (logits, then the caches). Records only: tensors are decoded on demand."""

    latency_ms: dict[int, float] = field(default_factory=dict)
    logits: dict[int, TensorRecord] = field(default_factory=dict)
    capture_blocks: dict[int, RunData] = field(default_factory=dict)
    outputs: dict[int, list[TensorRecord]] = field(default_factory=dict)


def _program_outputs(block: RunData) -> list[TensorRecord]:
    found = []
    for event in block.events:
        entry = event.debug_event.debug_entry if event.debug_event is not None else None
        if entry is not None and entry.output and entry.tensor is not None:
            found.append(entry.tensor)
    return found


def _latency_ms(block: RunData) -> float | None:
    for event in block.events:
        profile = event.profile_event
        if profile is not None and profile.name == METHOD_EVENT:
            return (profile.end_time - profile.start_time) / 1e6
    return None


def step_records(dump: ETDumpData) -> StepRecords:
    """Every step's records, keyed by the block's bundled input index (the step)."""
    records = StepRecords()
    for block in dump.run_data:
        step = block.bundled_input_index
        if step < 0:
            continue
        if block.name == TIMED_BLOCK:
            latency = _latency_ms(block)
            if latency is not None:
                records.latency_ms[step] = latency
            logits = _program_outputs(block)
            if logits:
                records.logits[step] = logits[0]
        elif block.name == CAPTURE_BLOCK:
            records.capture_blocks[step] = block
            records.outputs[step] = _program_outputs(block)
    return records


def decoded(buffer: bytes | memoryview, record: TensorRecord, where: str) -> torch.Tensor:
    return tensor_from_buffer(buffer, record, where)
