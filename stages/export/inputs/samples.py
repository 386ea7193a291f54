"""One sample as a source yields it: its tensors, its label (if any) and where it came from."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SourcedSample:
    """A sample's tensors (one per model input), its label, and its origin for messages
    ("data/a.npz[3]", "loader item 5")."""

    tensors: tuple[torch.Tensor, ...]
    label: torch.Tensor | None
    origin: str
