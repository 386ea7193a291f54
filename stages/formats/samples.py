"""Sample files two stages share (inputs.pt, reference_outputs.pt, run_outputs.pt): a torch.save'd
list of tensor tuples, one tuple per sample, read back weights-only (the later stages of the
process that wrote one take it from memory: `stages.handover.samples`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from stages.safe_io.atomic_write import atomic_path, declare_digest
from stages.safe_io.hashing_writer import HashingWriter
from stages.safe_io.safe_load import load_tensors

Samples = list[tuple[torch.Tensor, ...]]


def write_samples(samples: Samples, path: Path) -> Samples:
    """torch.save a list of tuples atomically (hashed as written, not read back); the tuples
    written."""
    kept = [tuple(s) for s in samples]
    with atomic_path(path) as tmp, tmp.open("wb") as file:
        writer = HashingWriter(file)
        torch.save(kept, writer)  # type: ignore[arg-type]  # an io.RawIOBase
        writer.flush()
        declare_digest(tmp, writer.sha256())
    return kept


def read_samples(path: Path) -> Samples:
    """Read inputs.pt / reference_outputs.pt / run_outputs.pt from disk (weights-only)."""
    return [tuple(s) for s in load_tensors(path.read_bytes(), str(path))]


def samples_as_inspector_reads(raw: object, input_count: int | None = None) -> Samples:
    """Representative inputs as ExecuTorch's Inspector reads them: one flat tuple (or list) of
    tensors is one run's inputs; a list of tuples/lists is one sample each.

    A flat list of single tensors for a one-input program (`[x1, x2]`) is several samples when
    `input_count` (the program's user inputs) says one tensor is one run.
    """
    if raw is None:
        return []
    if isinstance(raw, torch.Tensor):
        return [(raw,)]
    if not isinstance(raw, tuple | list) or not raw:
        return []
    if all(isinstance(item, tuple | list) for item in raw):
        return [tuple(item) for item in raw]
    if input_count == 1 and isinstance(raw, list) and len(raw) > 1:
        return [(item,) for item in raw]
    return [tuple(raw)]
