"""Config schemas the lower stage reads: which backend, at what precision, and fault injection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from stages.closed_sets import FaultKind, Precision


@dataclass
class FaultConfig:
    """Make one kernel compute wrongly, to test the debugger. Off when no target is set.

    kind: scale | offset | epsilon | nan | transpose; value parameterizes scale/offset/epsilon.
    """

    node: str | None = None
    debug_handle: int | None = None
    # A FaultKind value. Typed str, not FaultKind: Hydra reads `kind=nan` as a float, which an
    # Enum field refuses; pipeline.config.backend_checks checks it before any stage runs.
    kind: str = FaultKind.scale.value
    value: float = 1.5
    # In a generation (runtime.generate.*), act from this step on: 0 every execution, 1 decode only.
    from_step: int = 0


# `${backend_name:TARGET}` (registered by the pipeline): the `name` of the backend class TARGET
# names, so a run is labelled by the backend that runs, never by a name left over from a preset.
BACKEND_NAME_RESOLVER = "backend_name"


@dataclass
class BackendConfig:
    """A delegate backend: its class (`_target_`); `name` comes from that class."""

    name: str = f"${{{BACKEND_NAME_RESOLVER}:${{._target_}}}}"
    _target_: str = MISSING
    precision: Precision = Precision.fp32
    # 8da4w: weights quantized in groups of this many input features (torchao's PerGroup).
    group_size: int = 32
    compile_specs: dict[str, Any] = field(default_factory=dict)
    fault: FaultConfig = field(default_factory=FaultConfig)
    # Ops (named as backend.fault.node names them) computed at fp32 inside the delegate:
    # weights not quantized, output not rounded (the backend must honour it, or is refused).
    keep_float: list[str] = field(default_factory=list)
    # Ops left out of the delegate: the portable runtime runs them (the partitioner excludes them).
    keep_off: list[str] = field(default_factory=list)
