"""`inputs=loader`: the user's function returns an iterable of samples (the form Polygraphy's
data loader script and NNCF's Dataset take): a tuple of tensors, or `(tuple of tensors, label)`;
a single tensor counts as a 1-tuple. Items are taken one at a time, only as many as needed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stages.export.config import InputSpec
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.samples import SourcedSample
from stages.python_target import import_target


def _tensor(value: Any) -> Any:
    """numpy arrays as tensors (other values are left for the check to name)."""
    return torch.from_numpy(np.ascontiguousarray(value)) if isinstance(value, np.ndarray) else value


def _label(value: Any, index: int) -> torch.Tensor:
    try:
        return torch.as_tensor(_tensor(value))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputsConfigError(
            f"loader item {index}: its label {type(value).__name__} is not a number or tensor"
        ) from exc


def split_item(item: Any, inputs: int, index: int) -> tuple[tuple[Any, ...], torch.Tensor | None]:
    """(tensors, label) of one loader item: `x`, `(x, y, ...)`, `((x, ...), label)`, or for a
    one-input model `(x, label)`."""
    if isinstance(item, torch.Tensor | np.ndarray):
        return (_tensor(item),), None
    if not isinstance(item, tuple | list):
        raise InputsConfigError(
            f"loader item {index} is a {type(item).__name__}; yield a tuple of tensors or "
            "(tuple of tensors, label)"
        )
    if len(item) == 2 and isinstance(item[0], tuple | list):
        return tuple(map(_tensor, item[0])), _label(item[1], index)
    if len(item) == 2 and inputs == 1 and isinstance(item[0], torch.Tensor | np.ndarray):
        return (_tensor(item[0]),), _label(item[1], index)
    return tuple(map(_tensor, item)), None


def loader_stream(
    target: str, kwargs: Mapping[str, Any], specs: Sequence[InputSpec], base_dir: Path
) -> Iterator[SourcedSample]:
    """Call the loader, then take its items one at a time; its exceptions name the item."""
    function = import_target(target, "inputs._target_", base_dir, InputsConfigError, reuse=True)
    try:
        iterator = iter(function(**dict(kwargs)))
    except Exception as exc:
        raise InputsConfigError(
            f"inputs._target_={target}: calling it failed: {type(exc).__name__}: {exc}"
        ) from exc
    index = 0
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except Exception as exc:
            raise InputsConfigError(
                f"inputs._target_={target}: the loader raised at item {index}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        tensors, label = split_item(item, len(specs), index)
        yield SourcedSample(tensors, label, f"loader item {index}")
        index += 1
