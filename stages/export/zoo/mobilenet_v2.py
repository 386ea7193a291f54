"""MobileNetV2: inverted residual blocks with depthwise convs and ReLU6 (hardtanh)."""

from __future__ import annotations

import torch
from torch import nn

# (expansion, output channels, repeats, first stride) — the paper's table 2.
_SETTINGS = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


def _divisible(value: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn_relu(inp: int, out: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inp, out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out),
        nn.ReLU6(),
    )


class InvertedResidual(nn.Module):
    """Expand (1x1) → depthwise (3x3) → project (1x1), residual when shapes allow."""

    def __init__(self, inp: int, out: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = inp * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(_conv_bn_relu(inp, hidden, 1, 1))
        layers += [
            _conv_bn_relu(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, out, 1, bias=False),
            nn.BatchNorm2d(out),
        ]
        self.conv = nn.Sequential(*layers)
        self.use_residual = stride == 1 and inp == out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_residual else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 with a width multiplier; `stages` truncates the block table for tiny tests."""

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0, stages: int = 7) -> None:
        super().__init__()
        channels = _divisible(32 * width_mult)
        last = _divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [_conv_bn_relu(3, channels, 3, 2)]
        for expansion, out, repeats, stride in _SETTINGS[:stages]:
            out_c = _divisible(out * width_mult)
            for i in range(repeats):
                features.append(
                    InvertedResidual(channels, out_c, stride if i == 0 else 1, expansion)
                )
                channels = out_c
        features.append(_conv_bn_relu(channels, last, 1, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Linear(last, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).mean(dim=(2, 3))
        return self.classifier(x)


def build_mobilenet_v2(**kwargs: object) -> MobileNetV2:
    model = MobileNetV2(**kwargs)  # type: ignore[arg-type]
    return model.eval()
