"""Each sample checked against model.inputs before anything uses it: count, shape, dtype, and
finite values in float inputs; the message names the sample's index and where it came from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import torch

from stages.export.config import InputSpec
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.random_source import spec_dtype
from stages.export.inputs.samples import SourcedSample


def _problem(tensor: object, spec: InputSpec, position: int) -> str | None:
    """What is wrong with one input tensor against its spec, or None."""
    if not isinstance(tensor, torch.Tensor):
        return f"input {position} is a {type(tensor).__name__}, not a tensor"
    if list(tensor.shape) != [int(d) for d in spec.shape]:
        return (
            f"input {position} has shape {list(tensor.shape)}, model.inputs[{position}].shape "
            f"is {list(spec.shape)}"
        )
    wanted = spec_dtype(spec, position)
    if tensor.dtype != wanted:
        return (
            f"input {position} is {str(tensor.dtype).removeprefix('torch.')}, "
            f"model.inputs[{position}].dtype is {spec.dtype} (convert the data to it)"
        )
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        return f"input {position} holds NaN or Inf values"
    return None


def check_sample(sample: SourcedSample, specs: Sequence[InputSpec], index: int) -> None:
    """InputsConfigError naming sample `index` and its origin when it does not fit the specs."""
    problem = (
        f"it has {len(sample.tensors)} tensor(s), model.inputs has {len(specs)}"
        if len(sample.tensors) != len(specs)
        else next(
            (
                p
                for i, (t, s) in enumerate(zip(sample.tensors, specs, strict=True))
                if (p := _problem(t, s, i)) is not None
            ),
            None,
        )
    )
    if problem is not None:
        raise InputsConfigError(f"sample {index} ({sample.origin}): {problem}")


def checked(
    samples: Iterable[SourcedSample], specs: Sequence[InputSpec]
) -> Iterator[SourcedSample]:
    """The samples, each checked as it passes (nothing is read ahead)."""
    for index, sample in enumerate(samples):
        check_sample(sample, specs, index)
        yield sample
