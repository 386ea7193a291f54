"""Processed bytes of the emulated delegates: a header, a JSON kernel table, raw tensor bytes.

Self-contained (no pickle): `decode_blob` rebuilds every kernel and weight from the bytes alone.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

import torch

from stages.backends.backend_api import BackendError

MAGIC = b"DDBLOB01"
_HEADER = struct.Struct("<8sQ")
_ALIGN = 64
_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "int8": torch.int8,
    "int64": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
}


@dataclass
class BlobTensor:
    """A named constant inside a blob (weights keep their debug handle in the name for qnn)."""

    name: str
    value_id: int
    tensor: torch.Tensor
    scales: torch.Tensor | None = None  # per-channel int8 scales (axis 0)


def encode_blob(document: dict[str, Any], tensors: list[BlobTensor]) -> bytes:
    """header | json | pad | tensor bytes (each 64-byte aligned)."""
    table = []
    chunks: list[bytes] = []
    offset = 0

    def add(t: torch.Tensor) -> dict[str, Any]:
        nonlocal offset
        raw = t.detach().contiguous().cpu().numpy().tobytes()
        pad = (-offset) % _ALIGN
        chunks.append(b"\0" * pad)
        offset += pad
        entry = {
            "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape),
            "offset": offset,
            "nbytes": len(raw),
        }
        chunks.append(raw)
        offset += len(raw)
        return entry

    for item in tensors:
        entry = {"name": item.name, "value_id": item.value_id, "data": add(item.tensor)}
        if item.scales is not None:
            entry["scales"] = add(item.scales)
        table.append(entry)
    body = json.dumps({**document, "tensors": table}).encode()
    return _HEADER.pack(MAGIC, len(body)) + body + b"".join(chunks)


def _read_tensor(data: memoryview, base: int, entry: dict[str, Any]) -> torch.Tensor:
    dtype = _DTYPES.get(str(entry["dtype"]))
    if dtype is None:
        raise BackendError(f"delegate blob: unsupported tensor dtype {entry['dtype']!r}")
    start, size = base + int(entry["offset"]), int(entry["nbytes"])
    shape = [int(d) for d in entry["shape"]]
    expected = (
        int(torch.tensor(shape, dtype=torch.int64).prod().item())
        * torch.empty((), dtype=dtype).element_size()
    )
    if start < base or size != expected or start + size > len(data):
        raise BackendError("delegate blob: tensor bytes out of range (truncated or corrupt blob)")
    flat = (
        torch.frombuffer(bytearray(data[start : start + size]), dtype=dtype)
        if size
        else torch.empty(0, dtype=dtype)
    )
    return flat.reshape(shape)


def decode_blob(blob: bytes) -> tuple[dict[str, Any], list[BlobTensor]]:
    """The JSON document and the tensors of a blob; BackendError when it is not one."""
    if len(blob) < _HEADER.size:
        raise BackendError("delegate blob: too short for its header")
    magic, length = _HEADER.unpack_from(blob, 0)
    if magic != MAGIC:
        raise BackendError(
            f"delegate blob: bad magic {magic!r}; was it written by this tool's lower stage?"
        )
    base = _HEADER.size + length
    if base > len(blob):
        raise BackendError("delegate blob: truncated kernel table")
    try:
        document = json.loads(blob[_HEADER.size : base].decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise BackendError(f"delegate blob: corrupt kernel table ({exc})") from exc
    view = memoryview(blob)
    try:
        tensors = [
            BlobTensor(
                name=str(e["name"]),
                value_id=int(e["value_id"]),
                tensor=_read_tensor(view, base, e["data"]),
                scales=_read_tensor(view, base, e["scales"]) if "scales" in e else None,
            )
            for e in document.pop("tensors")
        ]
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RuntimeError) as exc:
        raise BackendError(
            f"delegate blob: corrupt tensor table ({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc
    return document, tensors
