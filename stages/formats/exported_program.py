"""Save and load exported programs with their debug handles restored."""

from __future__ import annotations

import copy
import hashlib
import io
import warnings
from collections import OrderedDict
from pathlib import Path

import torch
from torch.export import ExportedProgram

from stages.formats.atomic_write import atomic_path
from stages.formats.graph_handles import restore_debug_handles
from stages.formats.hashing_writer import HashingWriter
from stages.formats.safe_load import UnsafePayloadError, load_exported_program_bytes

# Loaded programs by the sha256 of their bytes: the lower and analyze stages of one invocation
# load the same program (torch.export.load ~0.5 s for a ViT-Ti; a copy ~0.03 s).
_LOADED: OrderedDict[str, ExportedProgram] = OrderedDict()
LOADED_KEPT = 2
LOADED_MAX_BYTES = 256 * 1024 * 1024  # bigger programs are loaded each time (memory over speed)


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
    digest is taken while writing instead of reading the file back."""
    with atomic_path(Path(path)) as tmp, tmp.open("wb") as file:
        writer = HashingWriter(file)
        torch.export.save(program, writer)  # type: ignore[arg-type]  # an io.RawIOBase
        writer.flush()
        return writer.sha256(), writer.size


def load_exported_program(source: Path | bytes, what: str | None = None) -> ExportedProgram:
    """Load through the safe loader, then node.meta["debug_handle"] restored from custom meta."""
    if isinstance(source, bytes):
        data, what = source, what or "exported program"
    else:
        what = what or str(source)
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise ExportedProgramError(
                f"{what}: cannot read ({exc.strerror or exc}); run the export stage first"
            ) from exc
    key = hashlib.sha256(data).hexdigest() if len(data) <= LOADED_MAX_BYTES else None
    if key is None or key not in _LOADED:
        try:
            program = load_exported_program_bytes(data, what)
        except UnsafePayloadError as exc:
            raise ExportedProgramError(str(exc)) from exc
        restore_debug_handles(program)
        if key is None:
            return program
        _keep(key, program)
    _LOADED.move_to_end(key)
    return _copy(_LOADED[key])


def remember_exported_program(program: ExportedProgram, sha256: str, size: int) -> None:
    """Keep the program the export stage just saved (a file of `size` bytes with that sha256):
    the lower and analyze stages of the same invocation take a copy instead of loading the file
    again (same size cap as loads).

    The caller must not change `program` afterwards (the export stage does not).
    """
    if size <= LOADED_MAX_BYTES:
        _keep(sha256, program)


def _keep(key: str, program: ExportedProgram) -> None:
    _LOADED[key] = program
    _LOADED.move_to_end(key)
    while len(_LOADED) > LOADED_KEPT:
        _LOADED.popitem(last=False)


def _copy(program: ExportedProgram) -> ExportedProgram:
    """A copy callers may change (lowering rewrites graphs) without touching the kept one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree LeafSpec deprecation
        return copy.deepcopy(program)
