"""A deep residual MLP (122 ops) whose int8 accuracy is lost at a few places: the searches'
realistic-size case.

Each of its `blocks` residual blocks is `x + down(relu(up(x)))`; in the blocks `outlier_blocks`
names, `up` writes hidden channel 0 about `outlier` times larger than the others (as
`outlier_mlp`'s `linear_1` does) and `down` reads it with a matching small weight. A per-tensor
int8 scale of that hidden activation leaves its other channels a few steps, so each such block
costs most of the output's SNR; the other blocks lose what int8 loses anywhere. Weights are
seeded.
"""

from __future__ import annotations

import torch
from torch import nn


def _seeded(layer: nn.Linear, generator: torch.Generator, gain: float = 1.0) -> None:
    fan_in = layer.weight.shape[1]
    layer.weight.copy_(gain * torch.randn(layer.weight.shape, generator=generator) / fan_in**0.5)
    layer.bias.copy_(0.1 * torch.randn(layer.bias.shape, generator=generator))


class Block(nn.Module):
    """x + down(relu(up(x))): linear, relu, linear, add."""

    def __init__(self, width: int, hidden: int, generator: torch.Generator) -> None:
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)
        with torch.no_grad():
            _seeded(self.up, generator)
            _seeded(self.down, generator, gain=0.5)  # the residual stream grows slowly

    def add_outlier(self, outlier: float) -> None:
        with torch.no_grad():
            self.up.weight[0] *= outlier
            self.up.bias[0] = abs(float(self.up.bias[0])) * outlier
            self.down.weight[:, 0] /= outlier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


class DeepOutlierMLP(nn.Module):
    """inp → `blocks` residual blocks → out; outlier channels in the blocks `outlier_blocks`."""

    def __init__(
        self,
        in_features: int = 16,
        width: int = 32,
        hidden: int = 64,
        out_features: int = 8,
        blocks: int = 30,
        outlier_blocks: tuple[int, ...] | list[int] = (9, 21),
        outlier: float = 200.0,
    ) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.inp = nn.Linear(in_features, width)
        layers = [Block(width, hidden, generator) for _ in range(blocks)]
        for index in outlier_blocks:
            layers[index].add_outlier(outlier)
        self.blocks = nn.ModuleList(layers)
        self.out = nn.Linear(width, out_features)
        with torch.no_grad():
            _seeded(self.inp, generator)
            _seeded(self.out, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def build_deep_outlier_mlp(**kwargs: object) -> DeepOutlierMLP:
    return DeepOutlierMLP(**kwargs)  # type: ignore[arg-type]
