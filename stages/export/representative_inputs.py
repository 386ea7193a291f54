"""Representative inputs: seeded samples from the model's input specs, or loaded from a file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from stages.export.config import InputsConfig, InputSpec
from stages.formats.samples import Samples
from stages.safe_io.safe_load import UnsafePayloadError, load_tensors


class InputsConfigError(ValueError):
    """Input specs or an inputs file that cannot be used; the message names the option."""


def _dtype(name: str, index: int) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise InputsConfigError(
            f"model.inputs[{index}].dtype={name!r} is not a torch dtype (e.g. float32, int64)"
        )
    return dtype


def generate_inputs(specs: Sequence[InputSpec], cfg: InputsConfig) -> Samples:
    """`cfg.count` samples: randn for floating dtypes, randint(0, high) for integer dtypes."""
    if cfg.count < 1:
        raise InputsConfigError(f"inputs.count={cfg.count}: need at least 1 representative input")
    generator = torch.Generator().manual_seed(cfg.seed)
    samples: Samples = []
    for _ in range(cfg.count):
        sample = []
        for index, spec in enumerate(specs):
            dtype = _dtype(spec.dtype, index)
            shape = tuple(int(d) for d in spec.shape)
            if dtype.is_floating_point:
                sample.append(torch.randn(shape, generator=generator).to(dtype))
            elif dtype == torch.bool:
                sample.append(torch.randint(0, 2, shape, generator=generator).bool())
            else:
                sample.append(
                    torch.randint(
                        0, max(int(spec.high), 1), shape, generator=generator, dtype=dtype
                    )
                )
        samples.append(tuple(sample))
    return samples


def load_inputs_file(path: Path, specs: Sequence[InputSpec]) -> Samples:
    """A torch.save'd list of tensor tuples, checked against the specs."""
    if not path.is_file():
        raise InputsConfigError(f"inputs.path={path}: no such file")
    try:
        loaded = load_tensors(path.read_bytes(), f"inputs.path={path}")
    except UnsafePayloadError as exc:
        raise InputsConfigError(str(exc)) from exc
    if isinstance(loaded, torch.Tensor):
        loaded = [(loaded,)]
    if not isinstance(loaded, list | tuple) or not loaded:
        raise InputsConfigError(f"inputs.path={path}: expected a non-empty list of tensor tuples")
    samples = [tuple(s) if isinstance(s, list | tuple) else (s,) for s in loaded]
    for n, sample in enumerate(samples):
        if len(sample) != len(specs):
            raise InputsConfigError(
                f"inputs.path={path}: sample {n} has {len(sample)} tensors, model.inputs has {len(specs)}"
            )
        for i, (tensor, spec) in enumerate(zip(sample, specs, strict=True)):
            if not isinstance(tensor, torch.Tensor) or list(tensor.shape) != list(spec.shape):
                got = (
                    list(tensor.shape)
                    if isinstance(tensor, torch.Tensor)
                    else type(tensor).__name__
                )
                raise InputsConfigError(
                    f"inputs.path={path}: sample {n} input {i} is {got}, model.inputs[{i}].shape is {list(spec.shape)}"
                )
    return samples


def representative_inputs(specs: Sequence[InputSpec], cfg: InputsConfig) -> Samples:
    return (
        load_inputs_file(Path(cfg.path).expanduser(), specs)
        if cfg.path
        else generate_inputs(specs, cfg)
    )
