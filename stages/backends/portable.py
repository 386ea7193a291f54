"""The portable baseline: delegates nothing, every op is an operator call."""

from __future__ import annotations

from typing import Any

import torch

from stages.backends.backend_api import (
    BackendDetails,
    BackendError,
    PartitionGraph,
    PreprocessResult,
)
from stages.backends.tracer_protocol import EventTracerProtocol


class PortableBackend(BackendDetails):
    """No partitions; faults are applied by the executor to the chosen operator call."""

    name = "portable"
    applies_faults = True  # every op is an operator call, which the executor faults
    honours_keep_float = True  # every op already runs on the portable runtime at fp32

    def unsupported_reason(self, node: torch.fx.Node) -> str | None:
        return "the portable backend runs every op as an operator call"

    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        raise BackendError("the portable backend has no partitions to preprocess")

    def init(self, processed_bytes: bytes, compile_specs: dict[str, Any]) -> Any:
        raise BackendError("the portable backend has no delegate to initialize")

    def execute(
        self, handle: Any, inputs: list[torch.Tensor], tracer: EventTracerProtocol | None
    ) -> list[torch.Tensor]:
        raise BackendError("the portable backend has no delegate to execute")
