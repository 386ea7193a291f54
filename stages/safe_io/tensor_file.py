"""torch.save files read as weights-only data, from a bounded zip, never from a raw pickle."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import torch

from stages.safe_io.bounded_zip import BoundedZip, ZipLimitError
from stages.safe_io.reproducible_zip import ReproducibleZipFile

ZIP_MAGIC = b"PK\x03\x04"


class UnsafePayloadError(ValueError):
    """Bytes that could run code, or cost far more than they are worth, if loaded; names them."""


def repack_stored(archive: BoundedZip) -> bytes:
    """The members as a fresh uncompressed zip, so a second parser sees only checked bytes."""
    out = io.BytesIO()
    with ReproducibleZipFile(out, "w", compression=zipfile.ZIP_STORED) as fresh:
        for name in archive.names():
            fresh.writestr(name, archive.read(name))
    return out.getvalue()


def load_tensors(data: bytes, what: str) -> Any:
    """torch.load(weights_only=True) of a torch.save zip whose layout passed the bounds.

    Raw pickles (protocols 0-5, torch's pre-1.6 legacy format) are refused unread: this tool
    writes and accepts only the zip format, where torch's weights-only unpickler has no fallback.
    """
    if not data.startswith(ZIP_MAGIC):
        kind = "a raw pickle" if data[:1] == b"\x80" or data[-1:] == b"." else "not a zip"
        raise UnsafePayloadError(
            f"{what} is {kind}, not a torch.save zip archive; only weights-only tensor files "
            "are read (re-save it with torch.save)"
        )
    try:
        with BoundedZip(data, what) as archive:
            clean = repack_stored(archive)
    except ZipLimitError as exc:
        raise UnsafePayloadError(str(exc)) from exc
    try:
        return torch.load(io.BytesIO(clean), weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError, ...
        raise UnsafePayloadError(
            f"{what} is not a weights-only tensor file ({type(exc).__name__}: {_reason(exc)})"
        ) from exc


def _reason(exc: Exception) -> str:
    """The line of torch's message that says what was refused (not its advice to unpickle)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "GLOBAL" in line or "Unsupported" in line]
    return (named or lines or [""])[0][:200]
