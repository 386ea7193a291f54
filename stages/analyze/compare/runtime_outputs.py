"""The runtime's logged intermediate outputs, decoded from the debug buffer and linked to
debug handles, in execution order."""

from __future__ import annotations

from typing import Any

import torch

from stages.analyze.compare.gap.groups import RuntimeOutput, Value
from stages.analyze.link.linking import ProgramIndex, identifier_of, link_event, logged_outputs
from stages.analyze.link.map_check import MapCheck
from stages.formats.etdump import ETDumpData, ValueRecord, ValueType, tensor_from_buffer


def _decode(value: ValueRecord | None, buffer: bytes | memoryview, where: str) -> Value:
    if value is None:
        return None
    if value.val == ValueType.TENSOR and value.tensor is not None:
        return tensor_from_buffer(buffer, value.tensor, where)
    if value.val == ValueType.TENSOR_LIST and value.tensor_list is not None:
        return [tensor_from_buffer(buffer, t, where) for t in value.tensor_list]
    for scalar in (value.bool_value, value.int_value, value.double_value, value.float_value):
        if scalar is not None:  # Int/Bool/Double values (`.item()`): compared as 0-d tensors
            return scalar_tensor(scalar)
    return None


def scalar_tensor(value: Any) -> Any:
    """A Python bool/int/float as a 0-d tensor (float64 for floats); anything else unchanged."""
    if isinstance(value, bool | int | float):
        return torch.tensor(value, dtype=torch.float64 if isinstance(value, float) else None)
    return value


def runtime_outputs(
    dump: ETDumpData,
    buffer: bytes | memoryview,
    index: ProgramIndex,
    where: str = "debug buffer",
    map_check: MapCheck | None = None,
) -> list[RuntimeOutput]:
    """Intermediate outputs of every capture block, in execution order, linked to handles
    (with a `map_check`, as the delegate map findings allow: stages.analyze.link.map_check)."""
    outputs: list[RuntimeOutput] = []
    capture_blocks = [
        b
        for b in dump.run_data
        if any(e.debug_event is not None and e.debug_event.instruction_id >= 0 for e in b.events)
    ]
    for position, block in enumerate(capture_blocks):
        sample = block.bundled_input_index if block.bundled_input_index >= 0 else position
        for order, de, values in logged_outputs(block.events, index):
            if map_check is not None:
                link = map_check.output_link(index, de)
            else:
                ident = identifier_of(de.delegate_debug_id_int, de.delegate_debug_id_str)
                link = link_event(index, de.name, de.instruction_id, ident)
            if link is None or not link.debug_handles:
                continue
            decoded = [_decode(v, buffer, where) for v in values]
            value = decoded[0] if len(decoded) == 1 else decoded
            outputs.append(RuntimeOutput(order, sample, link, value))
    return outputs
