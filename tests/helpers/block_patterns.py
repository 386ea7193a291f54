"""Blocks people ship, small: conv + BatchNorm + activation (ReLU, hardswish), squeeze-excitation,
ShuffleNet's split/branch/cat/channel-shuffle unit (chunk -> getitem) and MobileNetV2's padded
residual (a pad reading a BatchNorm). BatchNorm statistics
are re-estimated on random batches, so activations have a trained network's scale."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional


class ConvBnAct(nn.Module):
    """conv -> BatchNorm -> activation -> conv (MobileNet's stem)."""

    def __init__(self, act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = act()
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.bn(self.conv(x))))


class SqueezeExcite(nn.Module):
    """conv -> BatchNorm -> hardswish, scaled by a pooled, squeezed and excited copy of itself."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.fc1 = nn.Conv2d(16, 4, 1)
        self.fc2 = nn.Conv2d(4, 16, 1)
        self.out = nn.Conv2d(16, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = functional.hardswish(self.bn(self.conv(x)))
        s = functional.adaptive_avg_pool2d(y, 1)
        s = functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        return self.out(y * s)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2's unit: split in two (getitem), one branch convolved, cat, channel shuffle."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Conv2d(3, 16, 1)
        self.branch = nn.Sequential(
            nn.Conv2d(8, 8, 1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1, groups=8),
            nn.BatchNorm2d(8),
        )
        self.post = nn.Conv2d(16, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        a, b = x.chunk(2, dim=1)
        y = torch.cat((a, self.branch(b)), dim=1)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        return self.post(y)


class PaddedResidual(nn.Module):
    """MobileNetV2's TF-padded inverted residual, small: (conv -> BatchNorm) three times, a pad reading
    that BatchNorm (TF's asymmetric same padding) -> depthwise conv -> BatchNorm, added to the
    first BatchNorm's output -> in-place ReLU6 -> conv. The in-place op has the export
    functionalized, so each BatchNorm is aten's three-output op, as in Hugging Face's models."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.stem_bn = nn.BatchNorm2d(16)
        self.expand = nn.Conv2d(16, 16, 1)
        self.expand_bn = nn.BatchNorm2d(16)
        self.conv = nn.Conv2d(16, 8, 1)
        self.bn = nn.BatchNorm2d(8)
        self.depthwise = nn.Conv2d(8, 8, 3, groups=8)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.expand_bn(self.expand(self.stem_bn(self.stem(x))))
        y = self.bn(self.conv(y))
        z = self.bn2(self.depthwise(functional.pad(y, (1, 1, 1, 1))))
        return self.head(functional.relu6(y + z, inplace=True))


def with_batchnorm_statistics(model: nn.Module, shape: tuple[int, ...], seed: int = 0) -> nn.Module:
    """`model` in eval mode after its BatchNorm running statistics saw 8 random batches."""
    torch.manual_seed(seed)
    model.train()
    with torch.no_grad():
        for _ in range(8):
            model(torch.randn(4, *shape[1:]))
    return model.eval()


PATTERNS: dict[str, Callable[[], nn.Module]] = {
    "conv_bn_relu": lambda: ConvBnAct(nn.ReLU),
    "conv_bn_hardswish": lambda: ConvBnAct(nn.Hardswish),
    "squeeze_excite": SqueezeExcite,
    "shuffle_unit": ShuffleUnit,
    "padded_residual": PaddedResidual,
}


def make_block(name: str = "conv_bn_hardswish") -> nn.Module:
    """A block of PATTERNS by name, BatchNorm statistics re-estimated (a model factory)."""
    return with_batchnorm_statistics(PATTERNS[name](), (1, 3, 16, 16))
