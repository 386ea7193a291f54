"""ResNet-18: basic blocks, batch norm, max pool, global average pool."""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """Two 3x3 convs with a (possibly projected) residual add."""

    def __init__(self, inp: int, out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.down: nn.Module = nn.Identity()
        if stride != 1 or inp != out:
            self.down = nn.Sequential(
                nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.down(x))


class ResNet18(nn.Module):
    """ResNet-18; `width` scales every stage, `blocks_per_stage` shrinks it for tests."""

    def __init__(self, num_classes: int = 1000, width: int = 64, blocks_per_stage: int = 2) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        layers: list[nn.Module] = []
        inp = width
        for stage in range(4):
            out = width * 2**stage
            for i in range(blocks_per_stage):
                layers.append(BasicBlock(inp, out, 2 if (i == 0 and stage > 0) else 1))
                inp = out
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(inp, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def build_resnet18(**kwargs: object) -> ResNet18:
    return ResNet18(**kwargs).eval()  # type: ignore[arg-type]
