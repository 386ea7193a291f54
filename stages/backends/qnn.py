"""Emulated QNN (NPU-style): string identifiers, handles embedded in tensor names, post-time
logging with an emulated cycle counter, and metadata bytes on every event."""

from __future__ import annotations

import re
import struct
from typing import Any, ClassVar

import torch

from stages.backends.delegate_mapping_builder import DelegateMappingBuilder
from stages.backends.kernel.delegate import KernelDelegate
from stages.backends.kernel.plan import KernelPlan
from stages.backends.kernel.runtime import LoadedDelegate, LoadedKernel, run_kernel
from stages.backends.op_support import NPU_STYLE_OPS, op_flops, qnn_kernel_name, tensor_bytes
from stages.backends.tracer_protocol import EventTracerProtocol
from stages.handles.debug_handles import DEBUG_HANDLE_META, DelegateIdentifier

DEBUG_ID_PATTERN = re.compile(r"__debugID_(\d+)$")
_METADATA = struct.Struct("<QQQ")
_NAME_BYTES = 40
# Emulated HTP: multiply-accumulate throughput per cycle and memory bandwidth per cycle.
_FLOPS_PER_CYCLE = {"fp32": 256.0, "fp16": 1024.0, "int8": 2048.0}
_BYTES_PER_CYCLE = 64.0
_KERNEL_OVERHEAD_CYCLES = 200
_ELEMENT_SIZE = {"fp32": 4, "fp16": 2, "int8": 1}


def parse_debug_ids(names: list[str]) -> list[int]:
    """Handles embedded in tensor names like 'linear_3__debugID_7'."""
    found = []
    for name in names:
        match = DEBUG_ID_PATTERN.search(name)
        if match:
            found.append(int(match.group(1)))
    return sorted(set(found))


def identifier_for(handles: list[int]) -> str:
    """'op_7' for one op, 'fused_op_11_12_15' for a fused kernel."""
    joined = "_".join(str(h) for h in handles)
    return f"fused_op_{joined}" if len(handles) > 1 else f"op_{joined}"


def pack_metadata(cycles: int, bytes_moved: int, flops: int, kernel: str) -> bytes:
    return _METADATA.pack(cycles, bytes_moved, flops) + kernel.encode()[:_NAME_BYTES]


class QnnBackend(KernelDelegate):
    """NPU-style delegate; timestamps are cycles at `ticks_per_ms` (an emulated 1.4 GHz clock)."""

    name = "qnn"
    supported_ops = frozenset(NPU_STYLE_OPS)
    generated_identifiers = False
    ticks_per_ms: ClassVar[float] = 1.4e6
    timed_by_cost_model: ClassVar[bool] = True  # emulated cycles, not the host's clock

    def __init__(self, precision: str = "fp16", fault: dict[str, Any] | None = None) -> None:
        super().__init__(precision, fault)
        self._cycle_counter = 0

    @classmethod
    def precisions(cls) -> tuple[str, ...]:
        return ("fp16", "int8", "fp32")

    def kernel_name(self, op: str) -> str:
        return qnn_kernel_name(op)

    def tensor_name(self, node: torch.fx.Node, consumer: torch.fx.Node) -> str:
        handle = consumer.meta.get(DEBUG_HANDLE_META)
        return f"{node.name}__debugID_{handle}" if handle is not None else str(node.name)

    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier:
        return builder.insert_delegate_mapping_entry(
            nodes=plan.nodes, identifier=identifier_for(plan.handles)
        )

    def kernel_identifier(self, kernel: dict[str, Any]) -> DelegateIdentifier:
        names = [name for op in kernel["ops"] for name in op["tensor_names"]]
        return identifier_for(parse_debug_ids(names))

    def log_kernel(
        self,
        tracer: EventTracerProtocol,
        handle: LoadedDelegate,
        kernel: LoadedKernel,
        values: list[Any],
    ) -> None:
        """Run, then log post-time with cycles from a cost model at the handle's precision."""
        run_kernel(kernel, values, handle.precision)
        precision = handle.precision
        flops = moved = 0
        for op, args, out_vid in kernel.cost_ops:
            inputs = args(values)
            output = values[out_vid]
            flops += op_flops(op, inputs, output)
            moved += tensor_bytes([*inputs, output], _ELEMENT_SIZE[precision])
        cycles = (
            int(max(flops / _FLOPS_PER_CYCLE[precision], moved / _BYTES_PER_CYCLE))
            + _KERNEL_OVERHEAD_CYCLES
        )
        start = self._cycle_counter
        self._cycle_counter += cycles
        tracer.log_profiling_delegate(
            kernel.name,
            kernel.identifier,
            start,
            start + cycles,
            pack_metadata(cycles, moved, flops, kernel.name),
        )

    @staticmethod
    def parse_delegate_metadata(metadata: bytes) -> dict[str, Any]:
        if len(metadata) < _METADATA.size:
            return {"raw": metadata.hex()} if metadata else {}
        cycles, moved, flops = _METADATA.unpack_from(metadata, 0)
        kernel = metadata[_METADATA.size :].decode(errors="replace")
        return {"cycles": cycles, "bytes_moved": moved, "flops": flops, "kernel": kernel}
