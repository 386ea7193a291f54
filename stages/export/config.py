"""Config schemas the export stage reads: the model, its inputs, and export options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class InputSpec:
    """One positional model input: shape and dtype; integer inputs draw from [0, high)."""

    shape: list[int] = MISSING
    dtype: str = "float32"
    high: int = 2


@dataclass
class ModelConfig:
    """A model: an nn.Module factory (`_target_`: `pkg.mod.fn` or `./file.py:fn`), its kwargs
    and input specs. `kwargs_for` names the factory a zoo option's kwargs were written for."""

    name: str = MISSING
    _target_: str = MISSING
    kwargs: dict[str, Any] = field(default_factory=dict)
    kwargs_for: str | None = None
    inputs: list[InputSpec] = MISSING
    checkpoint: str | None = None
    seed: int = 0


@dataclass
class InputsConfig:
    """Representative inputs: `count` seeded samples from the model's specs, or a file."""

    count: int = 1
    seed: int = 0
    path: str | None = None


@dataclass
class ExportConfig:
    """torch.export options."""

    strict: bool = False
    decompose: bool = False
