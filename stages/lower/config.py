"""Config schemas the lower stage reads: which backend, at what precision, and fault injection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from stages.formats.closed_sets import FaultKind, Precision


@dataclass
class FaultConfig:
    """Make one kernel compute wrongly, to test the debugger. Off when no target is set.

    kind: scale | offset | epsilon | nan | transpose; value parameterizes scale/offset/epsilon.
    """

    node: str | None = None
    debug_handle: int | None = None
    # A FaultKind value. Typed str, not FaultKind: Hydra reads `kind=nan` as a float, which an
    # Enum field refuses; pipeline.config.checks checks it before any stage runs.
    kind: str = FaultKind.scale.value
    value: float = 1.5


@dataclass
class BackendConfig:
    """A delegate backend picked from the registry by `name`, or a user's via `_target_`."""

    name: str = MISSING
    _target_: str = MISSING
    precision: Precision = Precision.fp32
    compile_specs: dict[str, Any] = field(default_factory=dict)
    fault: FaultConfig = field(default_factory=FaultConfig)
