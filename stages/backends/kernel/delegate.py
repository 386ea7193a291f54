"""`KernelDelegate`: the base of the emulated xnnpack and qnn backends, wiring its parts.

AOT: `kernel_plan` fuses a partition into kernels, `kernel_preprocess` writes them (weights at
the delegate's precision, the fault on the targeted kernel) to processed bytes. Run time:
`kernel_runtime` rebuilds them from the bytes and the program's named data (precision included) and runs each with torch
kernels; this class logs one event per kernel. `precision_emulation` and
`stages.backends.fault_injection` hold the numeric tricks.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch

from stages.backends.backend_api import BackendDetails, PartitionGraph, PreprocessResult
from stages.backends.delegate_mapping_builder import DelegateMappingBuilder
from stages.backends.kernel.blob import decode_blob
from stages.backends.kernel.plan import KernelPlan, is_getitem
from stages.backends.kernel.preprocess import preprocess_partition
from stages.backends.kernel.runtime import LoadedDelegate, LoadedKernel, load_delegate, run_kernel
from stages.backends.precision_emulation import round_to_precision
from stages.backends.tracer_protocol import EventTracerDebugLogLevel, EventTracerProtocol
from stages.handles.debug_handles import DelegateIdentifier
from stages.op_encoding import op_name


def _float_output(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, list | tuple):
        val = val[0] if val else None
    return isinstance(val, torch.Tensor) and val.is_floating_point()


class KernelDelegate(BackendDetails):
    """Common AOT + runtime of the emulated delegates; subclasses choose ops, names, logging."""

    supported_ops: frozenset[str] = frozenset()
    applies_faults = True
    honours_keep_float = True  # kept ops' kernels run at fp32 (stages/backends/kept_float.py)
    fuse: bool = True
    generated_identifiers: bool = True

    # AOT ---------------------------------------------------------------------------------
    def unsupported_reason(self, node: torch.fx.Node) -> str | None:
        if is_getitem(node):
            return None
        try:
            name = op_name(node.target)
        except ValueError:
            return f"{node.target} is not an ATen op"
        if name not in self.supported_ops:
            return f"{name} is not supported by {self.name}"
        if not _float_output(node):
            return f"{name} produces a non-floating tensor; {self.name} delegates float ops only"
        return None

    @abstractmethod
    def kernel_name(self, op: str) -> str: ...

    @abstractmethod
    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier: ...

    def tensor_name(self, node: torch.fx.Node, consumer: torch.fx.Node) -> str:
        return str(node.name)

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        return preprocess_partition(self, partition, self.fuse)

    # Runtime -----------------------------------------------------------------------------
    def kernel_identifier(self, kernel: dict[str, Any]) -> DelegateIdentifier:
        """The identifier a kernel logs under (qnn re-derives it from tensor names)."""
        identifier: DelegateIdentifier = kernel["identifier"]
        return identifier

    def init(self, processed_bytes: bytes, compile_specs: dict[str, Any]) -> LoadedDelegate:
        document, tensors = decode_blob(processed_bytes, self.named_data_map)
        return load_delegate(self.name, document, tensors, self.kernel_identifier)

    def log_kernel(
        self,
        tracer: EventTracerProtocol,
        handle: LoadedDelegate,
        kernel: LoadedKernel,
        values: list[Any],
    ) -> None:
        """Run the kernel with real-time logging around it; qnn overrides with post-time logging."""
        entry = tracer.start_profiling_delegate(kernel.name, kernel.identifier)
        run_kernel(kernel, values, handle.precision)
        tracer.end_profiling_delegate(entry, None)

    def execute(
        self, handle: LoadedDelegate, inputs: list[torch.Tensor], tracer: EventTracerProtocol | None
    ) -> list[torch.Tensor]:
        values: list[Any] = [None] * handle.num_values
        for vid, value in handle.constants:
            values[vid] = value
        kept = handle.inputs_kept_float or [False] * len(inputs)
        for vid, scale, value, fp32 in zip(
            handle.inputs, handle.input_scales, inputs, kept, strict=True
        ):
            values[vid] = value if fp32 else round_to_precision(value, handle.precision, scale)
        capture = (
            tracer is not None
            and tracer.debug_level >= EventTracerDebugLogLevel.INTERMEDIATE_OUTPUTS
        )
        for kernel in handle.kernels:
            if tracer is None:
                run_kernel(kernel, values, handle.precision)
                continue
            self.log_kernel(tracer, handle, kernel, values)
            if capture:
                tracer.log_intermediate_output_delegate(
                    None, kernel.identifier, values[kernel.output]
                )
        return [values[v] for v in handle.outputs]
