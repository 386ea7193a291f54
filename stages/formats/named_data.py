"""Named data of a lowered program: bytes delegates refer to by key instead of embedding copies.

As ExecuTorch's named data (`NamedDataStore` ahead of time, `NamedDataMap` at run time), each
entry is a key and its bytes. Here the bytes are a flat uint8 tensor kept by reference (an fp32
delegate's weights are the exported program's own tensors), saved as `named_data/<key>` members
of `lowered_program.zip` with `named_data.json` recording each entry's size and alignment.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

NAMED_DATA_DIR = "named_data/"
NAMED_DATA_INDEX = "named_data.json"
# Keys name zip members and files: a file-name-safe word, never "." or "..", bounded.
KEY_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MAX_KEY_LENGTH = 200
# torch's CPU allocator aligns every buffer to 64 bytes: a copy can always meet this much.
MAX_ALIGNMENT = 64
MAX_ENTRIES = 60_000  # below the zip member limit of every reader


class NamedDataError(ValueError):
    """A bad key, alignment, tensor, or a named-data index that does not match its members."""


def check_key(key: Any) -> str:
    """`key` when it can name a member (letters, digits, _ . -; at most MAX_KEY_LENGTH)."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key) or len(key) > MAX_KEY_LENGTH:
        raise NamedDataError(
            f"named data key {str(key)[:80]!r} is not valid: use letters, digits, _ . - "
            f"(not starting with . or -), at most {MAX_KEY_LENGTH} characters"
        )
    return key


def check_alignment(alignment: Any, key: str) -> int:
    """`alignment` when it is a power of two no larger than MAX_ALIGNMENT."""
    if (
        isinstance(alignment, bool)
        or not isinstance(alignment, int)
        or alignment < 1
        or alignment > MAX_ALIGNMENT
        or alignment & (alignment - 1)
    ):
        raise NamedDataError(
            f"named data {key!r}: alignment {alignment!r} must be a power of two from 1 to "
            f"{MAX_ALIGNMENT}"
        )
    return alignment


@dataclass(frozen=True)
class NamedData:
    """One entry: its bytes as a flat uint8 CPU tensor (a view, never a copy) and alignment."""

    data: torch.Tensor
    alignment: int = 1

    @property
    def nbytes(self) -> int:
        return int(self.data.numel())

    def same_bytes(self, other: NamedData) -> bool:
        """Equal bytes (the same storage is the cheap case)."""
        if self.nbytes != other.nbytes:
            return False
        if self.data.data_ptr() == other.data.data_ptr():
            return True
        return bool(torch.equal(self.data, other.data))


def tensor_bytes(tensor: torch.Tensor, key: str) -> torch.Tensor:
    """A contiguous CPU tensor's bytes as a flat uint8 view of its storage (no copy)."""
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        raise NamedDataError(
            f"named data {key!r}: the tensor must be a contiguous CPU tensor (it is kept by "
            "reference, not copied); pass `tensor.detach().cpu().contiguous()`"
        )
    flat = tensor.detach().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)


def buffer_bytes(data: bytes | bytearray | memoryview) -> torch.Tensor:
    """Immutable bytes as a flat uint8 tensor viewing them; a mutable buffer is copied first."""
    if isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly):
        data = bytes(data)
    if not len(data):
        return torch.empty(0, dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "buffer is not writable": never written
        return torch.frombuffer(data, dtype=torch.uint8)


def byte_view(data: torch.Tensor) -> memoryview:
    """A flat uint8 tensor's bytes as a buffer (no copy)."""
    raw: Any = data.numpy()  # a numpy array exports the buffer protocol
    return memoryview(raw) if data.numel() else memoryview(b"")


def aligned(data: torch.Tensor, alignment: int) -> torch.Tensor:
    """`data`, copied once into a fresh (64-byte aligned) buffer when its start is misaligned."""
    if not data.numel() or data.data_ptr() % alignment == 0:
        return data
    return data.clone()


def member_name(key: str) -> str:
    return NAMED_DATA_DIR + key


def index_document(entries: Mapping[str, NamedData]) -> dict[str, dict[str, int]]:
    """What `named_data.json` records: per key, its size in bytes and its alignment."""
    return {k: {"nbytes": e.nbytes, "alignment": e.alignment} for k, e in entries.items()}


def read_index(document: Any, members: Mapping[str, bytes], where: str) -> dict[str, NamedData]:
    """The entries `named_data.json` lists, each its member's bytes (sizes, keys and alignments
    checked; every `named_data/` member must be listed and every listed key present)."""
    if not isinstance(document, dict) or len(document) > MAX_ENTRIES:
        raise NamedDataError(f"{where}: {NAMED_DATA_INDEX} is not a key -> entry object")
    stored = {n.removeprefix(NAMED_DATA_DIR) for n in members if n.startswith(NAMED_DATA_DIR)}
    unlisted = sorted(stored - set(document))
    if unlisted:
        raise NamedDataError(f"{where}: named data member(s) {unlisted[:5]} not in the index")
    entries: dict[str, NamedData] = {}
    for key, entry in document.items():
        try:
            check_key(key)
            alignment = check_alignment(
                entry.get("alignment", 1) if isinstance(entry, dict) else 1, key
            )
        except NamedDataError as exc:
            raise NamedDataError(f"{where}: {exc}") from exc
        if not isinstance(entry, dict) or not isinstance(entry.get("nbytes"), int):
            raise NamedDataError(f"{where}: named data {key!r}: malformed index entry")
        data = members.get(member_name(key))
        if data is None:
            raise NamedDataError(
                f"{where}: named data {key!r} is listed but its member {member_name(key)} is "
                "missing (truncated or corrupt program; re-run the lower stage)"
            )
        if len(data) != entry["nbytes"]:
            raise NamedDataError(
                f"{where}: named data {key!r} holds {len(data)} bytes, its index says "
                f"{entry['nbytes']} (truncated or corrupt program; re-run the lower stage)"
            )
        entries[key] = NamedData(aligned(buffer_bytes(data), alignment), alignment)
    return entries
