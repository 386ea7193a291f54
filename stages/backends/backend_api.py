"""The delegate backend interface (AOT and runtime halves) and the backend registry."""

from __future__ import annotations

import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from stages.backends.backend_registry import REGISTERED_BACKENDS
from stages.formats.debug_handles import DebugHandle, DelegateIdentifier
from stages.formats.tracer_protocol import EventTracerProtocol


class BackendError(Exception):
    """A backend that cannot be found, built, or run with the given bytes/specs."""


@dataclass(frozen=True)
class PreprocessResult:
    """What `preprocess` returns: the delegate's bytes and its identifier → handles map."""

    processed_bytes: bytes
    debug_handle_map: dict[DelegateIdentifier, tuple[DebugHandle, ...]]


@dataclass(frozen=True)
class Rejection:
    """An op the backend left out of its partitions, and why."""

    node: str
    op: str
    debug_handle: DebugHandle | None
    reason: str


@dataclass
class PartitionGraph:
    """One partition, ready for preprocess: its nodes (topological order), inputs and outputs."""

    partition_id: int
    nodes: list[torch.fx.Node]
    inputs: list[torch.fx.Node]
    outputs: list[torch.fx.Node]
    constants: dict[str, torch.Tensor]
    calibration: dict[str, float]


class BackendDetails(ABC):
    """A delegate backend: which ops it takes, how it compiles them, how it runs them."""

    name: ClassVar[str]
    # Time unit of the timestamps this backend logs post-time: ticks per millisecond.
    ticks_per_ms: ClassVar[float] = 1e6

    def __init__(self, precision: str = "fp32", fault: dict[str, Any] | None = None) -> None:
        if precision not in self.precisions():
            raise BackendError(
                f"backend.precision={precision!r} is not supported by '{self.name}'; "
                f"choose one of {self.precisions()}"
            )
        self.precision = precision
        self.fault = fault

    @classmethod
    def precisions(cls) -> tuple[str, ...]:
        return ("fp32", "fp16", "int8")

    # AOT half -----------------------------------------------------------------------------
    @abstractmethod
    def unsupported_reason(self, node: torch.fx.Node) -> str | None:
        """None when the backend takes this op, else a human reason it does not."""

    @abstractmethod
    def preprocess(
        self, partition: PartitionGraph, compile_specs: dict[str, Any]
    ) -> PreprocessResult:
        """Compile one partition to bytes + the debug-handle map."""

    # Runtime half -------------------------------------------------------------------------
    @abstractmethod
    def init(self, processed_bytes: bytes, compile_specs: dict[str, Any]) -> Any:
        """Rebuild kernels from bytes alone."""

    @abstractmethod
    def execute(
        self, handle: Any, inputs: list[torch.Tensor], tracer: EventTracerProtocol | None
    ) -> list[torch.Tensor]:
        """Run the delegate, logging its own events to the tracer."""

    @staticmethod
    def parse_delegate_metadata(metadata: bytes) -> dict[str, Any]:
        """Decode the metadata bytes this backend attaches to its events."""
        return {"raw": metadata.hex()} if metadata else {}


BackendFactory = Callable[..., BackendDetails]
_REGISTRY = REGISTERED_BACKENDS


def backend_class(name: str, target: str | None = None) -> type[BackendDetails]:
    """The backend class for a registered name, or for a user's `_target_`."""
    dotted = target or _REGISTRY.get(name)
    if dotted is None:
        raise BackendError(
            f"backend '{name}' is not registered; known: {sorted(_REGISTRY)} (or set backend._target_)"
        )
    try:
        cls = pkgutil.resolve_name(dotted)
    except (ImportError, AttributeError, ValueError) as exc:
        raise BackendError(f"backend._target_={dotted!r} cannot be imported ({exc})") from exc
    if not (isinstance(cls, type) and issubclass(cls, BackendDetails)):
        raise BackendError(f"backend._target_={dotted!r} is not a BackendDetails subclass")
    if target and name not in _REGISTRY:
        _REGISTRY[name] = dotted
    return cls
