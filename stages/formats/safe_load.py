"""The one loader for tensors, programs and archives: weights-only data, bounded, never code.

Every file the tool reads may be hostile, its own cache included. Tensor files (inputs.pt,
reference_outputs.pt, run outputs, checkpoints, ETRecord members, the lowered program's
constants) are torch.save zips loaded weights-only; torch.export archives (exported.pt2, the
ETRecord's reference program) are checked member by member (`pt2_archive`) and torch reads only
the checked bytes, so its fallback to weights_only=False can never run. Zips are bounded before
anything is inflated (`bounded_zip`). Format readers wrap `UnsafePayloadError` in their own error.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from stages.formats.bounded_zip import BoundedZip, ZipLimitError, ZipLimits
from stages.formats.pt2_archive import check_program_targets, check_pt2_members, verified_pt2_bytes
from stages.formats.tensor_file import UnsafePayloadError, load_tensors

__all__ = [
    "BoundedZip",
    "UnsafePayloadError",
    "ZipLimitError",
    "ZipLimits",
    "check_pt2_archive",
    "check_pt2_members",
    "load_exported_program_bytes",
    "load_tensor_file",
    "load_tensors",
]


def load_tensor_file(path: Path, what: str | None = None) -> Any:
    """A torch.save file on disk, weights-only (see `load_tensors`)."""
    return load_tensors(Path(path).read_bytes(), what or str(path))


def check_pt2_archive(data: bytes, what: str) -> bytes:
    """Refuse a torch.export archive with anything torch would unpickle or eval; the clean bytes."""
    return verified_pt2_bytes(data, what)


def load_exported_program_bytes(data: bytes, what: str) -> torch.export.ExportedProgram:
    """torch.export.load of a checked archive, then every call target checked once more."""
    clean = verified_pt2_bytes(data, what)
    try:
        program = torch.export.load(io.BytesIO(clean))
    except Exception as exc:  # torch raises SerializeError, RuntimeError, KeyError, ...
        raise UnsafePayloadError(
            f"{what} is not a loadable torch.export program ({type(exc).__name__}: "
            f"{str(exc).strip()[:200]})"
        ) from exc
    check_program_targets(program, what)
    return program
