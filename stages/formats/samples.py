"""Sample files two stages share (inputs.pt, reference_outputs.pt, run_outputs.pt): a torch.save'd
list of tensor tuples, one tuple per sample, read back weights-only."""

from __future__ import annotations

from pathlib import Path

import torch

from stages.formats.atomic_write import atomic_path
from stages.formats.safe_load import load_tensors

Samples = list[tuple[torch.Tensor, ...]]


def save_samples(samples: Samples, path: Path) -> None:
    """torch.save a list of tuples atomically."""
    with atomic_path(path) as tmp:
        torch.save([tuple(s) for s in samples], tmp)


def load_samples(path: Path) -> Samples:
    """Read inputs.pt / reference_outputs.pt (weights-only)."""
    return [tuple(s) for s in load_tensors(path.read_bytes(), str(path))]
