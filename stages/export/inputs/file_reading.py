"""Read one user data file as arrays, by content: a .npy (`\\x93NUMPY`), a .npz (a zip of .npy
members) or a torch.save zip (weights-only). Sizes are bounded; pickled objects are refused."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stages.export.inputs.errors import InputsConfigError
from stages.safe_io.bounded_zip import BoundedZip, ZipLimitError, ZipLimits
from stages.safe_io.safe_load import UnsafePayloadError, load_tensors

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
LABELS_KEY = "labels"  # the .npz member / .pt dict key that holds one label per sample


@dataclass(frozen=True)
class FileContent:
    """What a data file holds: `batched` arrays (one per model input, leading dim = samples), or
    `samples` already one tuple each (a torch.save list); `labels` aligned with the samples."""

    batched: tuple[torch.Tensor, ...] = ()
    samples: tuple[tuple[Any, ...], ...] = ()
    labels: torch.Tensor | None = None


def _tensor(array: np.ndarray, what: str) -> torch.Tensor:
    try:
        return torch.from_numpy(np.ascontiguousarray(array))
    except TypeError as exc:
        raise InputsConfigError(
            f"{what} has dtype {array.dtype}, which torch cannot hold; save numbers"
        ) from exc


def _npy(data: bytes, what: str) -> torch.Tensor:
    """One .npy array, never unpickled."""
    try:
        return _tensor(np.load(io.BytesIO(data), allow_pickle=False), what)
    except ValueError as exc:
        reason = "holds pickled objects" if "pickle" in str(exc) else f"is not a .npy array ({exc})"
        raise InputsConfigError(f"{what} {reason}; only plain numeric arrays are read") from exc


def _npz(data: bytes, what: str, limit: int) -> FileContent:
    """The .npy members in archive order are the model's inputs; `labels` the labels."""
    try:
        with BoundedZip(data, what, ZipLimits(max_total_bytes=limit)) as archive:
            arrays = {
                name.removesuffix(".npy"): _npy(archive.read(name), f"{what} member {name}")
                for name in archive.names()
                if name.endswith(".npy")
            }
    except ZipLimitError as exc:
        raise InputsConfigError(str(exc)) from exc
    labels = arrays.pop(LABELS_KEY, None)
    return FileContent(batched=tuple(arrays.values()), labels=labels)


def _as_tensors(value: Any, what: str) -> tuple[torch.Tensor, ...]:
    """A tensor, or a tuple/list of tensors (one batched array per model input)."""
    items = value if isinstance(value, tuple | list) else (value,)
    if not items or not all(isinstance(t, torch.Tensor) for t in items):
        raise InputsConfigError(
            f"{what}: 'inputs' must be a tensor or a list of tensors (one per model input)"
        )
    return tuple(items)


def _torch_file(data: bytes, what: str) -> FileContent:
    """A tensor (a batch), a {"inputs": ..., "labels": ...} dict, or a list of sample tuples."""
    try:
        loaded = load_tensors(data, what)
    except UnsafePayloadError as exc:
        raise InputsConfigError(f"{exc}; a file with pickled code is never run") from exc
    if isinstance(loaded, torch.Tensor):
        return FileContent(batched=(loaded,))
    if isinstance(loaded, dict) and "inputs" in loaded:
        labels = loaded.get(LABELS_KEY)
        if labels is not None and not isinstance(labels, torch.Tensor):
            labels = torch.as_tensor(labels)
        return FileContent(batched=_as_tensors(loaded["inputs"], what), labels=labels)
    if isinstance(loaded, list | tuple) and loaded:
        samples = tuple(tuple(s) if isinstance(s, list | tuple) else (s,) for s in loaded)
        return FileContent(samples=samples)
    kind = (
        f"a dict with keys {sorted(map(str, loaded))[:5]}"
        if isinstance(loaded, dict)
        else type(loaded).__name__
    )
    raise InputsConfigError(
        f"{what} holds no tensors to use ({kind}); give a tensor (a batch), a list of sample "
        "tuples, or a dict {'inputs': ..., 'labels': ...}"
    )


def read_data_file(path: Path, max_bytes: int) -> FileContent:
    """The content of one data file; InputsConfigError naming it when it is too big, of an
    unknown kind, holds pickled code or no arrays."""
    what = f"inputs.path file {path}"
    size = path.stat().st_size
    if size > max_bytes:
        raise InputsConfigError(
            f"{what} is {size:,} bytes, over inputs.max_file_mb ({max_bytes:,} bytes); split it "
            "or raise inputs.max_file_mb"
        )
    data = path.read_bytes()
    if data.startswith(NPY_MAGIC):
        content = FileContent(batched=(_npy(data, what),))
    elif data.startswith(ZIP_MAGIC) and _is_npz(data, what):
        content = _npz(data, what, max_bytes * 4)
    elif data.startswith(ZIP_MAGIC):
        content = _torch_file(data, what)
    else:
        kind = "a raw pickle" if data[:1] == b"\x80" else "neither .npy, .npz nor a torch.save zip"
        raise InputsConfigError(
            f"{what} is {kind}; give .npy/.npz arrays (numpy.save) or tensors (torch.save)"
        )
    if not content.batched and not content.samples:
        raise InputsConfigError(f"{what} holds no tensors")
    return content


def _is_npz(data: bytes, what: str) -> bool:
    """A zip whose members are all .npy arrays (numpy.savez); a torch.save zip has a data.pkl."""
    try:
        with BoundedZip(data, what) as archive:
            names = archive.names()
    except ZipLimitError as exc:
        raise InputsConfigError(str(exc)) from exc
    return bool(names) and all(name.endswith(".npy") for name in names)
