"""A small MLP: the fastest model for smoke tests."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """Linear → ReLU stacks, with a residual add when widths match."""

    def __init__(
        self, in_features: int = 32, hidden: int = 64, out_features: int = 10, layers: int = 2
    ) -> None:
        super().__init__()
        self.inp = nn.Linear(in_features, hidden)
        self.hidden = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers - 1))
        self.out = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.inp(x))
        for layer in self.hidden:
            x = torch.relu(layer(x)) + x
        return self.out(x)


def build_mlp(**kwargs: object) -> MLP:
    return MLP(**kwargs)  # type: ignore[arg-type]
