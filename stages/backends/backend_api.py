"""The delegate backend interface (AOT and runtime halves) and the backend registry.

Backend authors import these names from `stages.backends.api`, which stays put when this moves.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from stages.backends.backend_error import BackendError
from stages.backends.backend_registry import BUILTIN_BACKEND_NAMES, REGISTERED_BACKENDS
from stages.backends.fault_injection import fault_hits
from stages.backends.named_data_store import NamedDataMap, NamedDataStoreOutput
from stages.backends.tracer_protocol import EventTracerProtocol
from stages.formats.executorch.program import EXECUTORCH_BACKEND_PREFIX, is_executorch_backend
from stages.handles.debug_handles import DebugHandle, DelegateIdentifier
from stages.python_target import absolute_target, import_target

# A backend's name labels run dirs, events and MLflow runs: a plain file-name-safe word.
BACKEND_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class PreprocessResult:
    """What `preprocess` returns: the delegate's bytes, its identifier → handles map, and the
    named data its bytes refer to by key (`NamedDataStore.get_named_data_store_output()`)."""

    processed_bytes: bytes
    debug_handle_map: dict[DelegateIdentifier, tuple[DebugHandle, ...]]
    data_store_output: NamedDataStoreOutput | None = None


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
    # Names of member nodes `backend.keep_float` keeps at fp32 (weights unquantized, output not
    # rounded); a backend that honours it sets `honours_keep_float = True`.
    keep_float: frozenset[str] = frozenset()


class BackendDetails(ABC):
    """A delegate backend: which ops it takes, how it compiles them, how it runs them."""

    # The backend's name: run dirs, events, lowering.json and MLflow are labelled with it.
    name: ClassVar[str]
    # Time unit of the timestamps this backend logs post-time: ticks per millisecond.
    ticks_per_ms: ClassVar[float] = 1e6
    # True when kernel timestamps come from a cost model rather than the clock of the device that
    # ran the delegate call: the analysis then skips the clock check (clock_mismatch).
    timed_by_cost_model: ClassVar[bool] = False
    # True when preprocess applies `backend.fault.*` (through `fault_for`); a fault asked of a
    # backend that leaves this False is refused before any stage runs.
    applies_faults: ClassVar[bool] = False
    # True when preprocess computes the ops in `PartitionGraph.keep_float` at fp32; a
    # `backend.keep_float` asked of a backend that leaves this False is refused before any stage.
    # (`backend.keep_off` needs nothing: the lower stage's partitioner leaves those ops out.)
    honours_keep_float: ClassVar[bool] = False
    # The program's named data, installed by the runtime before `init` (read-only; empty until).
    named_data_map: NamedDataMap = NamedDataMap.EMPTY

    def __init__(self, precision: str = "fp32", fault: dict[str, Any] | None = None) -> None:
        if precision not in self.precisions():
            raise BackendError(
                f"backend.precision={precision!r} is not supported by '{self.name}'; "
                f"choose one of {self.precisions()}"
            )
        self.precision = precision
        self.fault = fault
        # Names of the nodes whose kernels took the fault (filled by `fault_for`).
        self.faulted_nodes: list[str] = []

    @classmethod
    def precisions(cls) -> tuple[str, ...]:
        return ("fp32", "fp16", "int8")

    def fault_for(self, nodes: Iterable[torch.fx.Node]) -> dict[str, Any] | None:
        """The fault when one of `nodes` (a kernel's ops) is its target, else None; call it once
        per kernel in preprocess and store what it returns with the kernel. Records the hit, so
        the lower stage knows the fault was applied."""
        listed = list(nodes)
        found = fault_hits(self.fault, listed)
        if found is not None:
            self.faulted_nodes.extend(n.name for n in listed)
        return found

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
        """Rebuild kernels from the bytes (and the named data they refer to:
        `self.named_data_map.get_data(key)`)."""

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
# Users' backends met in this process (name -> absolute target), so the run stage finds a
# backend by the name lower recorded; the built-in table itself is never changed.
_USER_BACKENDS: dict[str, str] = {}


def _checked_class(found: Any, target: str) -> type[BackendDetails]:
    """`found` as a backend class whose `name` may label a run; BackendError otherwise."""
    if not (isinstance(found, type) and issubclass(found, BackendDetails)):
        raise BackendError(
            f"backend._target_={target!r} is not a BackendDetails subclass (subclass "
            "stages.backends.api.BackendDetails)"
        )
    name = getattr(found, "name", None)
    if not isinstance(name, str) or not BACKEND_NAME_PATTERN.fullmatch(name):
        raise BackendError(
            f"backend._target_={target!r}: {found.__name__} needs a class attribute "
            f'`name = "..."` (letters, digits, _ . -), got {name!r}; it labels the run'
        )
    if is_executorch_backend(name) and BUILTIN_BACKEND_NAMES.get(target) != name:
        raise BackendError(
            f"backend._target_={target!r}: {found.__name__}.name={name!r} starts with "
            f"{EXECUTORCH_BACKEND_PREFIX!r}, which is kept for ExecuTorch's own backends; rename it"
        )
    builtin = {builtin_name: dotted for dotted, builtin_name in BUILTIN_BACKEND_NAMES.items()}
    if name in builtin and BUILTIN_BACKEND_NAMES.get(target) != name:
        raise BackendError(
            f"backend._target_={target!r}: {found.__name__}.name={name!r} is the name of the "
            f"built-in backend {builtin[name]}; give your class a `name` of its own"
        )
    return found


def backend_class(name: str, target: str | None = None) -> type[BackendDetails]:
    """The backend class for a registered name, or for a user's `_target_` (a dotted path, or
    a file form `FILE.py:Class`, relative paths from the working directory)."""
    dotted = target or REGISTERED_BACKENDS.get(name) or _USER_BACKENDS.get(name)
    if dotted is None:
        known = sorted({*REGISTERED_BACKENDS, *_USER_BACKENDS})
        raise BackendError(
            f"backend '{name}' is not registered; known: {known} (or set backend._target_)"
        )
    found = import_target(dotted, "backend._target_", Path.cwd(), BackendError, reuse=True)
    cls = _checked_class(found, dotted)
    if target and name not in REGISTERED_BACKENDS:
        _USER_BACKENDS[name] = absolute_target(dotted, Path.cwd())
    return cls


def backend_name(target: str) -> str:
    """The name a backend `_target_` labels runs with: a built-in's without importing it, else
    the class's `name` attribute (importing the user's module)."""
    known = BUILTIN_BACKEND_NAMES.get(target)
    if known is not None:
        return known
    found = import_target(target, "backend._target_", Path.cwd(), BackendError, reuse=True)
    return _checked_class(found, target).name
