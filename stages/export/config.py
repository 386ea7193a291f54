"""Config schemas the export stage reads: the model, its inputs, and export options."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
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


class InputsSource(StrEnum):
    """Where samples come from: seeded random from model.inputs, the user's files or loader."""

    random = "random"
    files = "files"
    loader = "loader"


@dataclass
class InputsConfig:
    """The samples (`inputs=random|files|loader`): `evaluation` of them are run and judged,
    `calibration` others calibrate int8 (None: the source's default; 0: the evaluation ones)."""

    source: InputsSource = InputsSource.random
    count: int = 1  # random: evaluation samples (inputs.evaluation, when set, wins)
    seed: int = 0
    path: str | None = None  # files: a file, a directory or a glob of .pt/.npy/.npz
    _target_: str | None = None  # loader: `pkg.mod.fn` or `./file.py:fn`
    kwargs: dict[str, Any] = field(default_factory=dict)
    calibration: int | None = None
    evaluation: int | None = None
    max_file_mb: int = 1024  # files: a larger file is refused unread


@dataclass
class ExportConfig:
    """torch.export options."""

    strict: bool = False
    decompose: bool = False
