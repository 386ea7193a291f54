"""The one loader for tensor files: weights-only data, bounded, never code.

Every file the tool reads may be hostile, its own cache included. Tensor files (inputs.pt,
reference_outputs.pt, run outputs, checkpoints, ETRecord members, the lowered program's
constants) are torch.save zips loaded weights-only; torch.export archives are checked by
`stages.formats.pt2_archive` on top of it. Zips are bounded before
anything is inflated (`bounded_zip`). Format readers wrap `UnsafePayloadError` in their own error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stages.safe_io.bounded_zip import BoundedZip, ZipLimitError, ZipLimits
from stages.safe_io.tensor_file import UnsafePayloadError, load_tensors

__all__ = [
    "BoundedZip",
    "UnsafePayloadError",
    "ZipLimitError",
    "ZipLimits",
    "load_tensor_file",
    "load_tensors",
]


def load_tensor_file(path: Path, what: str | None = None) -> Any:
    """A torch.save file on disk, weights-only (see `load_tensors`)."""
    return load_tensors(Path(path).read_bytes(), what or str(path))
