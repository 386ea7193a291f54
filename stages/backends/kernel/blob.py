"""Processed bytes of the emulated delegates: a header, a JSON kernel table, raw tensor bytes.

No pickle. A tensor with a `key` is not embedded: it goes to the program's named data
(`NamedDataStore`) and the table refers to it by key, dtype and shape, so the blob holds only the
kernel table (weights are not copied). Blobs with embedded tensors (older files) still decode.
"""

from __future__ import annotations

import json
import struct
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from stages.backends.backend_error import BackendError
from stages.backends.named_data_store import NamedDataMap, NamedDataStore

MAGIC = b"DDBLOB01"
_HEADER = struct.Struct("<8sQ")
_ALIGN = 64
_NAMED_ALIGN = 16  # the kernels need element alignment only; 16 holds for loaded bytes too
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
    # Named-data key of the stored tensor (its scales go under `key.scales`); None embeds it.
    key: str | None = None


def _raw_bytes(t: torch.Tensor) -> memoryview:
    """A tensor's bytes as a flat view (no copy when it is already a contiguous CPU tensor)."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    raw: Any = flat.view(torch.uint8).numpy()  # a numpy array exports the buffer protocol
    return memoryview(raw) if flat.numel() else memoryview(b"")


def _by_key(store: NamedDataStore, key: str, t: torch.Tensor) -> dict[str, Any]:
    """The table entry of a tensor kept in the named data store (by reference, not copied)."""
    store.add_named_data(key, t.detach().contiguous(), alignment=_NAMED_ALIGN)
    return {"key": key, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}


def encode_blob(
    document: dict[str, Any], tensors: list[BlobTensor], store: NamedDataStore | None = None
) -> bytes:
    """header | json (space-padded) | tensor bytes, each 64-byte aligned from the blob's start
    (so a reader can use them in place). With a `store`, tensors that have a key go to it
    instead; the others are copied once, into the blob."""
    table = []
    chunks: list[memoryview | bytes] = []
    offset = 0

    def add(t: torch.Tensor, key: str | None) -> dict[str, Any]:
        nonlocal offset
        if store is not None and key is not None:
            return _by_key(store, key, t)
        raw = _raw_bytes(t)
        pad = (-offset) % _ALIGN
        chunks.append(b"\0" * pad)
        offset += pad
        entry = {
            "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape),
            "offset": offset,
            "nbytes": raw.nbytes,
        }
        chunks.append(raw)
        offset += raw.nbytes
        return entry

    for item in tensors:
        entry = {"name": item.name, "value_id": item.value_id, "data": add(item.tensor, item.key)}
        if item.scales is not None:
            scales_key = None if item.key is None else f"{item.key}.scales"
            entry["scales"] = add(item.scales, scales_key)
        table.append(entry)
    body = json.dumps({**document, "tensors": table}).encode()
    body += b" " * (-(_HEADER.size + len(body)) % _ALIGN)  # tensors aligned to the blob's start
    return b"".join([_HEADER.pack(MAGIC, len(body)), body, *chunks])


def _read_tensor(
    data: memoryview, base: int, entry: dict[str, Any], named: NamedDataMap
) -> torch.Tensor:
    dtype = _DTYPES.get(str(entry["dtype"]))
    if dtype is None:
        raise BackendError(f"delegate blob: unsupported tensor dtype {entry['dtype']!r}")
    if "key" in entry:  # kept in the program's named data
        return named.get_tensor(str(entry["key"]), dtype, [int(d) for d in entry["shape"]])
    start, size = base + int(entry["offset"]), int(entry["nbytes"])
    shape = [int(d) for d in entry["shape"]]
    expected = (
        int(torch.tensor(shape, dtype=torch.int64).prod().item())
        * torch.empty((), dtype=dtype).element_size()
    )
    if start < base or size != expected or start + size > len(data):
        raise BackendError("delegate blob: tensor bytes out of range (truncated or corrupt blob)")
    return _tensor_at(data, start, size, dtype).reshape(shape)


def _tensor_at(data: memoryview, start: int, size: int, dtype: torch.dtype) -> torch.Tensor:
    """The bytes as a tensor: a view of an immutable, aligned blob (weights are never written
    at run time), else a copy (a mutable buffer could change under the tensor)."""
    if not size:
        return torch.empty(0, dtype=dtype)
    if not data.readonly:
        return torch.frombuffer(bytearray(data[start : start + size]), dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "buffer is not writable": by design
        view = torch.frombuffer(data, dtype=dtype, count=size // dtype.itemsize, offset=start)
    return view if view.data_ptr() % dtype.itemsize == 0 else view.clone()


def decode_blob(
    blob: bytes, named: NamedDataMap = NamedDataMap.EMPTY
) -> tuple[dict[str, Any], list[BlobTensor]]:
    """The JSON document and the tensors of a blob; BackendError when it is not one.

    Tensors of a `bytes` blob are views of it (no copy); of a mutable buffer, copies; tensors
    referred to by key are views of `named` (the program's named data)."""
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
                tensor=_read_tensor(view, base, e["data"], named),
                scales=_read_tensor(view, base, e["scales"], named) if "scales" in e else None,
                key=str(e["data"]["key"]) if "key" in e["data"] else None,
            )
            for e in document.pop("tensors")
        ]
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RuntimeError) as exc:
        raise BackendError(
            f"delegate blob: corrupt tensor table ({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc
    return document, tensors
