"""Models the search benchmark uses and the tests do not: a small conv net whose int8 accuracy is
lost at one activation with an outlier channel (seeded weights)."""

from __future__ import annotations

import torch
from torch import nn


class ConvOutlier(nn.Module):
    """conv → relu → conv (channel 0 ~outlier× the others) → mean → linear."""

    def __init__(self, channels: int = 8, classes: int = 10, outlier: float = 300.0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(1)
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.mid = nn.Conv2d(channels, channels, 3, padding=1)
        self.head = nn.Linear(channels, classes)
        with torch.no_grad():
            for layer in (self.stem, self.mid, self.head):
                fan_in = layer.weight[0].numel()
                layer.weight.copy_(
                    torch.randn(layer.weight.shape, generator=generator) / fan_in**0.5
                )
                layer.bias.copy_(0.1 * torch.randn(layer.bias.shape, generator=generator))
            self.mid.weight[0] *= outlier
            self.head.weight[:, 0] /= outlier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.mid(torch.relu(self.stem(x))).mean(dim=(2, 3))
        return self.head(features)


def build_conv_outlier(**kwargs: object) -> ConvOutlier:
    return ConvOutlier(**kwargs)  # type: ignore[arg-type]
