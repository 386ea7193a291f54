"""An MLP whose int8 accuracy is lost at one place: a hidden activation with one outlier channel.

`linear_1` writes channel 0 about `outlier` times larger than the others, so a per-tensor int8
scale of that activation leaves the other channels a few steps; `linear_2` reads channel 0 with
a matching small weight, so the output is not dominated by it. Weights are seeded.
"""

from __future__ import annotations

import torch
from torch import nn


class OutlierMLP(nn.Module):
    """linear → relu → linear_1 (one outlier channel) → linear_2."""

    def __init__(
        self, in_features: int = 16, hidden: int = 32, out_features: int = 8, outlier: float = 200.0
    ) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.inp = nn.Linear(in_features, hidden)
        self.mid = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, out_features)
        with torch.no_grad():
            for layer in (self.inp, self.mid, self.out):
                fan_in = layer.weight.shape[1]
                layer.weight.copy_(
                    torch.randn(layer.weight.shape, generator=generator) / fan_in**0.5
                )
                layer.bias.copy_(0.1 * torch.randn(layer.bias.shape, generator=generator))
            self.mid.weight[0] *= outlier
            self.mid.bias[0] = abs(float(self.mid.bias[0])) * outlier
            self.out.weight[:, 0] /= outlier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.mid(torch.relu(self.inp(x))))


def build_outlier_mlp(**kwargs: object) -> OutlierMLP:
    return OutlierMLP(**kwargs)  # type: ignore[arg-type]
