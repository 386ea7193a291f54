"""Save and load exported programs with their debug handles restored."""

from __future__ import annotations

import io
import os
from pathlib import Path

import torch
from torch.export import ExportedProgram

from stages.export.debug_handle_pass import restore_debug_handles


def exported_program_bytes(program: ExportedProgram) -> bytes:
    """torch.export.save into memory (the ETRecord embeds these bytes)."""
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return buffer.getvalue()


def save_exported_program(program: ExportedProgram, path: Path) -> bytes:
    """Write atomically; returns the bytes written (for fingerprints)."""
    data = exported_program_bytes(program)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return data


def load_exported_program(source: Path | bytes) -> ExportedProgram:
    """torch.export.load, then node.meta["debug_handle"] mirrored from the serialized custom meta."""
    stream = io.BytesIO(source) if isinstance(source, bytes) else source
    program = torch.export.load(stream)
    restore_debug_handles(program)
    return program
