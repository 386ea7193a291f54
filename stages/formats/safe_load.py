"""Loading tensors and archives without ever unpickling arbitrary objects."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import torch

# torch.save writes a zip (PK) or, in its legacy format, a raw pickle (protocol opcode 0x80).
_PICKLE_PREFIXES = (b"PK\x03\x04", b"\x80")


class UnsafePayloadError(ValueError):
    """A member carries a pickle that is not a plain weights-only tensor container."""


def load_tensors(data: bytes, what: str) -> Any:
    """torch.load with weights_only=True; anything else is refused."""
    try:
        return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError, ...
        raise UnsafePayloadError(
            f"{what} is not a weights-only tensor file ({type(exc).__name__}: {str(exc)[:160]})"
        ) from exc


def check_pt2_archive(data: bytes, what: str) -> None:
    """Refuse a torch.export archive whose pickled members are not weights-only.

    torch.export.load falls back to weights_only=False for members it cannot load safely; checking
    every pickled member first means that fallback can never run on untrusted bytes.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UnsafePayloadError(f"{what} is not a torch.export archive ({exc})") from exc
    for member in members:
        if member.filename.endswith((".json", "/version", "byteorder", "serialization_id")):
            continue
        with archive.open(member) as fh:
            head = fh.read(4)
        if head.startswith(_PICKLE_PREFIXES):
            load_tensors(archive.read(member), f"{what} member {member.filename}")
