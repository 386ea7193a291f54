"""The debug buffer: logged tensors, 64-byte aligned, only the bytes used, then our trailer.

ExecuTorch's buffer is the tensor bytes alone and the ETDump's offsets count from its start. Ours
is the same bytes followed by an 80-byte trailer (program sha256, payload sha256, payload size,
magic), so offsets still point right, ExecuTorch's readers ignore the tail, and a buffer says
which program wrote it. A buffer without the trailer (ExecuTorch's) reads as before.
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from stages.formats.etdump.records import ETDumpError, ScalarType, TensorRecord
from stages.safe_io.atomic_write import atomic_path, declare_digest

ALIGNMENT = 64
TRAILER_MAGIC = b"DDBGBUF1"
# program sha256, payload sha256 (raw digests), payload size, magic: the magic ends the file.
_TRAILER = struct.Struct("<32s32sQ8s")
TRAILER_SIZE = _TRAILER.size
_NO_PROGRAM = bytes(32)
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
_MAX_TENSOR_SPAN = 1 << 62  # bytes; sizes whose product passes this overflow torch's int64 math


class DebugBufferError(ETDumpError):
    """A debug buffer that is truncated, altered, or not the one its ETDump was written with."""


@dataclass(frozen=True)
class DebugBuffer:
    """The tensor bytes the ETDump points into, and what our trailer says about them."""

    payload: memoryview
    program_fingerprint: str | None  # sha256 of the lowered program; None: no trailer/unknown
    payload_sha256: str | None  # None: no trailer (e.g. written by ExecuTorch)

    @property
    def has_trailer(self) -> bool:
        return self.payload_sha256 is not None

    def content_sha256(self) -> str:
        """sha256 of the payload (recorded in the trailer, else computed)."""
        return self.payload_sha256 or hashlib.sha256(self.payload).hexdigest()


class DebugBufferWriter:
    """Appends tensors; `records` describe them by dtype, sizes, strides and offset."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._handed_over = False  # the payload belongs to the analysis once written
        self._digest = hashlib.sha256()
        self.size = 0

    def append(self, tensor: torch.Tensor) -> TensorRecord:
        t = tensor.detach().contiguous().cpu()
        scalar = _TO_SCALAR.get(t.dtype)
        if scalar is None:
            t, scalar = t.to(torch.float32), ScalarType.FLOAT
        pad = (-self.size) % ALIGNMENT
        if pad:
            self._add(b"\0" * pad)
        offset = self.size
        if t.numel():  # copied once, straight into the payload
            raw: Any = t.reshape(-1).view(torch.uint8).numpy()  # exports the buffer protocol
            self._add(memoryview(raw))
        return TensorRecord(int(scalar), tuple(t.shape), tuple(t.stride()), offset)

    def extend(self, raw: bytes) -> None:
        """Bytes another runtime wrote (ExecuTorch's debug buffer), kept at their own offsets."""
        self._add(raw)

    def _add(self, chunk: bytes | memoryview) -> None:
        if self._handed_over:  # appending after a write: the kept payload must not change
            self._data, self._handed_over = bytearray(self._data), False
        self._digest.update(chunk)
        self._data += chunk
        self.size = len(self._data)

    def payload_sha256(self) -> str:
        """sha256 of the tensor bytes so far (the ETDump records it to pair the two files)."""
        return self._digest.hexdigest()

    def write(self, path: Path, program_fingerprint: str | None = None) -> DebugBuffer:
        """Payload + trailer, atomically; the buffer as written, its payload shared with this
        writer (copied first if more is appended), for the analysis of this process to take."""
        program = bytes.fromhex(program_fingerprint) if program_fingerprint else _NO_PROGRAM
        if len(program) != 32:
            raise DebugBufferError(f"program fingerprint {program_fingerprint!r} is not a sha256")
        trailer = _TRAILER.pack(program, self._digest.digest(), self.size, TRAILER_MAGIC)
        whole = self._digest.copy()  # the file is the payload, then the trailer
        whole.update(trailer)
        with atomic_path(path) as tmp:
            with tmp.open("wb") as fh:
                fh.write(self._data)
                fh.write(trailer)
            declare_digest(tmp, whole.hexdigest())  # not read back to be hashed
        self._handed_over = True
        written = None if program == _NO_PROGRAM else program.hex()
        return DebugBuffer(memoryview(self._data), written, self.payload_sha256())


def parse_debug_buffer(data: bytes | bytearray, where: str = "debug buffer") -> DebugBuffer:
    """Split off and verify our trailer; bytes without one are all payload (ExecuTorch's)."""
    view = memoryview(data)
    if len(data) < TRAILER_SIZE or data[-len(TRAILER_MAGIC) :] != TRAILER_MAGIC:
        return DebugBuffer(view, None, None)
    program, digest, size, _ = _TRAILER.unpack_from(data, len(data) - TRAILER_SIZE)
    if size != len(data) - TRAILER_SIZE:
        raise DebugBufferError(
            f"{where}: its trailer records {size} bytes of tensors but the file holds "
            f"{len(data) - TRAILER_SIZE}: truncated or altered; re-run the run stage to write it"
        )
    payload = view[:size]
    if hashlib.sha256(payload).digest() != digest:
        raise DebugBufferError(
            f"{where}: its tensor bytes do not match the sha256 in its trailer: the file was "
            "altered or corrupted after it was written; re-run the run stage to write it again"
        )
    return DebugBuffer(payload, None if program == _NO_PROGRAM else program.hex(), digest.hex())


def read_debug_buffer(path: Path) -> DebugBuffer:
    """Read and verify a debug buffer file; DebugBufferError names the file and the problem."""
    try:
        data = _read_writable(Path(path))
    except OSError as exc:
        raise DebugBufferError(
            f"{path}: cannot read the debug buffer ({exc.strerror or exc})"
        ) from exc
    return parse_debug_buffer(data, str(path))


def _read_writable(path: Path) -> bytearray:
    """The file's bytes in one writable buffer, so logged tensors can be views of it (no copy)."""
    with path.open("rb") as fh:
        data = bytearray(os.fstat(fh.fileno()).st_size)
        got = fh.readinto(data)
        del data[got:]
        data += fh.read()  # a file that grew (or reports no size) is read to its end
    return data


def scalar_dtype(scalar_type: int) -> torch.dtype | None:
    """The torch dtype of an ExecuTorch ScalarType number, None when this reader lacks it."""
    return _FROM_SCALAR.get(scalar_type)


def tensor_nbytes(record: TensorRecord) -> int | None:
    """Bytes a record's tensor spans in the buffer; None when its dtype or sizes are unreadable."""
    dtype = _FROM_SCALAR.get(record.scalar_type)
    if dtype is None or any(s < 0 for s in record.sizes):
        return None
    return math.prod(record.sizes) * dtype.itemsize


def tensor_from_buffer(
    buffer: bytes | memoryview, record: TensorRecord, where: str = "debug buffer"
) -> torch.Tensor:
    """The tensor a record points at; ETDumpError when the buffer is too short or dtype unknown."""
    dtype = _FROM_SCALAR.get(record.scalar_type)
    if dtype is None:
        raise ETDumpError(f"{where}: unsupported scalar type {record.scalar_type}")
    if any(s < 0 for s in record.sizes):
        raise ETDumpError(f"{where}: negative tensor size {record.sizes}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    if math.prod(max(s, 1) for s in record.sizes) * itemsize > _MAX_TENSOR_SPAN:
        # Even an empty tensor's strides are products of its sizes: torch would overflow.
        raise ETDumpError(f"{where}: tensor sizes {record.sizes} are beyond any real tensor")
    numel = math.prod(record.sizes)
    nbytes = numel * itemsize
    if numel == 0:  # ExecuTorch logs an empty tensor at offset -1: no bytes, nothing to read
        return torch.empty(record.sizes, dtype=dtype)
    if record.offset < 0 or record.offset + nbytes > len(buffer):
        raise ETDumpError(
            f"{where}: tensor at offset {record.offset} needs {nbytes} bytes but the buffer has "
            f"{len(buffer)}; pass the debug buffer written with this ETDump"
        )
    view = memoryview(buffer)
    if not view.readonly and record.offset % itemsize == 0:  # a view: the bytes are not copied
        return torch.frombuffer(view, dtype=dtype, count=numel, offset=record.offset).reshape(
            record.sizes
        )
    raw = bytearray(view[record.offset : record.offset + nbytes])
    return torch.frombuffer(raw, dtype=dtype).reshape(record.sizes)
