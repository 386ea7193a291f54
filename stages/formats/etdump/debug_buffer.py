"""The debug buffer: logged tensors, 64-byte aligned, only the bytes used."""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from stages.formats.etdump.records import ETDumpError, ScalarType, TensorRecord

ALIGNMENT = 64
_TO_SCALAR = {
    torch.uint8: ScalarType.BYTE,
    torch.int8: ScalarType.CHAR,
    torch.int16: ScalarType.SHORT,
    torch.int32: ScalarType.INT,
    torch.int64: ScalarType.LONG,
    torch.float16: ScalarType.HALF,
    torch.float32: ScalarType.FLOAT,
    torch.float64: ScalarType.DOUBLE,
    torch.bool: ScalarType.BOOL,
    torch.bfloat16: ScalarType.BFLOAT16,
}
_FROM_SCALAR = {int(v): k for k, v in _TO_SCALAR.items()}


class DebugBufferWriter:
    """Appends tensors; `records` describe them by dtype, sizes, strides and offset."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self.size = 0

    def append(self, tensor: torch.Tensor) -> TensorRecord:
        t = tensor.detach().contiguous().cpu()
        scalar = _TO_SCALAR.get(t.dtype)
        if scalar is None:
            t, scalar = t.to(torch.float32), ScalarType.FLOAT
        pad = (-self.size) % ALIGNMENT
        if pad:
            self._chunks.append(b"\0" * pad)
            self.size += pad
        offset = self.size
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        self._chunks.append(raw)
        self.size += len(raw)
        return TensorRecord(int(scalar), tuple(t.shape), tuple(t.stride()), offset)

    def write(self, path: Path) -> int:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            for chunk in self._chunks:
                fh.write(chunk)
        os.replace(tmp, path)
        return self.size


def tensor_from_buffer(
    buffer: bytes | memoryview, record: TensorRecord, where: str = "debug buffer"
) -> torch.Tensor:
    """The tensor a record points at; ETDumpError when the buffer is too short or dtype unknown."""
    dtype = _FROM_SCALAR.get(record.scalar_type)
    if dtype is None:
        raise ETDumpError(f"{where}: unsupported scalar type {record.scalar_type}")
    if any(s < 0 for s in record.sizes):
        raise ETDumpError(f"{where}: negative tensor size {record.sizes}")
    numel = math.prod(record.sizes)
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if record.offset < 0 or record.offset + nbytes > len(buffer):
        raise ETDumpError(
            f"{where}: tensor at offset {record.offset} needs {nbytes} bytes but the buffer has "
            f"{len(buffer)}; pass the debug buffer written with this ETDump"
        )
    if numel == 0:
        return torch.empty(record.sizes, dtype=dtype)
    raw = bytearray(buffer[record.offset : record.offset + nbytes])
    return torch.frombuffer(raw, dtype=dtype).reshape(record.sizes)
