"""Backends of the tests' own, each with one debug-handle map bug (docs/delegate_map_check.md).

All are the emulated XNNPACK with one thing changed: the map its preprocess returns, the
identifiers its runtime logs, or whether it logs its intermediate outputs at all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from stages.backends.backend_api import PartitionGraph, PreprocessResult
from stages.backends.delegate_mapping_builder import DelegateMappingBuilder
from stages.backends.kernel.plan import KernelPlan
from stages.backends.kernel.runtime import LoadedDelegate
from stages.backends.tracer_protocol import EventTracerProtocol
from stages.backends.xnnpack import XnnpackBackend
from stages.handles.debug_handles import DelegateIdentifier
from stages.op_encoding import op_name

UNKNOWN_HANDLE = 99999
RENUMBERED = 1000  # what a stale runtime adds to every identifier


class EmptyMapBackend(XnnpackBackend):
    """Runs and logs every kernel, but returns an empty map."""

    name = "empty_map_npu"

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        return replace(super().preprocess(partition, compile_specs), debug_handle_map={})


class FirstOpOnlyBackend(XnnpackBackend):
    """A fused kernel (`linear+relu`) maps only its first op."""

    name = "first_op_npu"

    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier:
        return builder.insert_delegate_mapping_entry(nodes=plan.nodes[:1])


class UnknownHandleBackend(XnnpackBackend):
    """The first kernel of every partition also claims a handle that is not in the graph."""

    name = "unknown_handle_npu"

    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier:
        extra = [UNKNOWN_HANDLE] if not builder.get_delegate_mapping() else []
        return builder.insert_delegate_mapping_entry(handles=[*plan.handles, *extra])


class MissingEntryBackend(XnnpackBackend):
    """The map lacks the partition's last kernel, which still logs under its identifier."""

    name = "missing_entry_npu"

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        result = super().preprocess(partition, compile_specs)
        last = list(result.debug_handle_map)[-1]
        kept = {k: v for k, v in result.debug_handle_map.items() if k != last}
        return replace(result, debug_handle_map=kept)


class StaleIdentifierBackend(XnnpackBackend):
    """A complete map, but the runtime logs every kernel under an identifier the map lacks."""

    name = "stale_id_npu"

    def kernel_identifier(self, kernel: dict[str, Any]) -> DelegateIdentifier:
        return int(kernel["identifier"]) + RENUMBERED


class SharedHandleBackend(XnnpackBackend):
    """Each kernel maps its ops, and one extra identifier claims the first kernel's first op again
    (legal in ExecuTorch: one op lowered to several kernels)."""

    name = "shared_handle_npu"
    generated_identifiers = False

    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier:
        first = not builder.get_delegate_mapping()
        identifier = builder.insert_delegate_mapping_entry(
            nodes=plan.nodes, identifier=f"kernel_{plan.handles[0]}"
        )
        if first:
            builder.insert_delegate_mapping_entry(
                nodes=plan.nodes[:1], identifier=f"prepack_{plan.handles[0]}"
            )
        return identifier


class _NoDelegateOutputs:
    """A tracer view that takes the delegate's events but drops its intermediate outputs."""

    def __init__(self, tracer: EventTracerProtocol) -> None:
        self._tracer = tracer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tracer, name)

    def log_intermediate_output_delegate(self, *args: Any) -> None:
        return None


class NoOutputsBackend(XnnpackBackend):
    """Logs kernel events but never its intermediate outputs, and leaves `add` to the CPU so a
    non-delegated op follows the partition."""

    name = "no_outputs_npu"

    def unsupported_reason(self, node: torch.fx.Node) -> str | None:
        if node.op == "call_function" and "add" in op_name(node.target):
            return "add stays on the CPU in this test backend"
        return super().unsupported_reason(node)

    def execute(
        self, handle: LoadedDelegate, inputs: list[torch.Tensor], tracer: EventTracerProtocol | None
    ) -> list[torch.Tensor]:
        view = _NoDelegateOutputs(tracer) if tracer is not None else None
        return super().execute(handle, inputs, view)  # type: ignore[arg-type]


class BadHandleTypeBackend(XnnpackBackend):
    """Builds its map by hand, with handles as strings (not a map at all)."""

    name = "bad_handle_type_npu"

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        result = super().preprocess(partition, compile_specs)
        broken: dict[Any, Any] = {
            k: tuple(str(h) for h in v) for k, v in result.debug_handle_map.items()
        }
        return replace(result, debug_handle_map=broken)
