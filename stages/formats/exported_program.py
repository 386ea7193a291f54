"""Save and parse exported programs (exported.pt2) with their debug handles restored; the copy
this process holds is `stages.handover.exported_program`'s."""

from __future__ import annotations

import io
from pathlib import Path

import torch
from torch.export import ExportedProgram

from stages.formats.pt2_archive import load_exported_program_bytes
from stages.handles.graph_handles import restore_debug_handles
from stages.paused_gc import paused_gc
from stages.safe_io.atomic_write import atomic_path, declare_digest
from stages.safe_io.file_digests import read_with_sha256
from stages.safe_io.hashing_writer import HashingWriter
from stages.safe_io.safe_load import UnsafePayloadError


class ExportedProgramError(Exception):
    """An exported program file (exported.pt2, or an ETRecord's) is missing, corrupt or unsafe."""


def exported_program_bytes(program: ExportedProgram) -> bytes:
    """torch.export.save into memory (the ETRecord embeds these bytes)."""
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return buffer.getvalue()


def save_exported_program(program: ExportedProgram, path: Path) -> tuple[str, int]:
    """torch.export.save streamed into the file atomically; (sha256, size) of what it holds.

    The archive is never built in memory (a billion-parameter program is gigabytes) and the
    digest is taken while writing instead of reading the file back. The serializer makes and
    drops a few hundred thousand acyclic objects (ViT: ~160,000 deep copies): cyclic collections
    meanwhile would only walk the heap (torch's and the tracer's modules), so they wait."""
    with paused_gc(), atomic_path(Path(path)) as tmp, tmp.open("wb") as file:
        writer = HashingWriter(file)
        torch.export.save(program, writer)  # type: ignore[arg-type]  # an io.RawIOBase
        writer.flush()
        digest, size = writer.sha256(), writer.size
        declare_digest(tmp, digest)  # atomic_path keeps it: fingerprints need not read it back
        return digest, size


def parse_exported_program(data: bytes, what: str) -> ExportedProgram:
    """A torch.export archive parsed through the safe loader, node.meta["debug_handle"] restored
    from custom meta; every problem is an ExportedProgramError."""
    try:
        program = load_exported_program_bytes(data, what)
    except UnsafePayloadError as exc:
        raise ExportedProgramError(str(exc)) from exc
    restore_debug_handles(program)
    return program


def read_exported_program_file(path: Path, what: str) -> tuple[bytes, str]:
    """The file's bytes and sha256 (hashed as read); ExportedProgramError when it cannot be read."""
    try:
        return read_with_sha256(path)
    except OSError as exc:
        raise ExportedProgramError(
            f"{what}: cannot read ({exc.strerror or exc}); run the export stage first"
        ) from exc
