"""Seeded random samples from the model's input specs (`inputs=random`), drawn one at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from stages.export.config import InputSpec
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.samples import SourcedSample
from stages.formats.samples import Samples


def spec_dtype(spec: InputSpec, index: int) -> torch.dtype:
    """The torch dtype `model.inputs[index].dtype` names."""
    dtype = getattr(torch, spec.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise InputsConfigError(
            f"model.inputs[{index}].dtype={spec.dtype!r} is not a torch dtype (e.g. float32, int64)"
        )
    return dtype


def _draw(spec: InputSpec, index: int, generator: torch.Generator) -> torch.Tensor:
    """randn for floating dtypes, randint(0, high) for integer ones, coin flips for bool."""
    dtype = spec_dtype(spec, index)
    shape = tuple(int(d) for d in spec.shape)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    return torch.randint(0, max(int(spec.high), 1), shape, generator=generator, dtype=dtype)


def random_stream(specs: Sequence[InputSpec], seed: int) -> Iterator[SourcedSample]:
    """An endless seeded stream: sample n is the same for every run with this seed."""
    generator = torch.Generator().manual_seed(seed)
    index = 0
    while True:
        tensors = tuple(_draw(spec, i, generator) for i, spec in enumerate(specs))
        yield SourcedSample(tensors, None, f"random sample {index} (seed {seed})")
        index += 1


def generate_inputs(specs: Sequence[InputSpec], count: int, seed: int) -> Samples:
    """The first `count` samples of the seeded stream."""
    if count < 1:
        raise InputsConfigError(f"inputs.count={count}: need at least 1 representative input")
    stream = random_stream(specs, seed)
    return [next(stream).tensors for _ in range(count)]
