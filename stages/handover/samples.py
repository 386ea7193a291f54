"""Sample files (inputs.pt, reference_outputs.pt, run_outputs.pt) kept for the later stages of the
process that wrote them: they take the samples from memory instead of reading the file back
(`written_files`: only that exact, unchanged file), and only while no tensor was written to
since; they get copies."""

from __future__ import annotations

from pathlib import Path

import torch

from stages.formats.samples import Samples, read_samples, write_samples
from stages.handover.tensor_versions import tensor_versions
from stages.handover.written_files import WrittenFiles

# What this process wrote: the samples and their tensors' versions. A few files (inputs,
# reference and run outputs), each a few tensors per sample.
_WRITTEN: WrittenFiles[tuple[Samples, tuple[int, ...]]] = WrittenFiles(capacity=4)


def save_samples(samples: Samples, path: Path) -> None:
    """torch.save a list of tuples atomically (hashed as written, not read back), and keep them."""
    kept = write_samples(samples, path)
    tensors = [t for sample in kept for t in sample]
    versions = (
        tensor_versions(tensors) if all(isinstance(t, torch.Tensor) for t in tensors) else None
    )
    if versions is not None:
        _WRITTEN.keep(path, (kept, versions))


def load_samples(path: Path) -> Samples:
    """Read inputs.pt / reference_outputs.pt (weights-only); a file this process wrote, still
    as written, comes from memory (copies of the tensors written)."""
    written = _WRITTEN.get(path)
    if written is not None:
        samples, versions = written
        if tensor_versions([t for sample in samples for t in sample]) == versions:
            return [tuple(t.detach().clone() for t in sample) for sample in samples]
    return read_samples(path)
