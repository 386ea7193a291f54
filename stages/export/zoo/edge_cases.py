"""Graphs real users hit: torch.cond, a multi-output op with split consumers, three inputs."""

from __future__ import annotations

import torch
from torch import nn


class CondModel(nn.Module):
    """Takes a different branch depending on the data (torch.cond): both branches get handles."""

    def __init__(self, features: int = 16) -> None:
        super().__init__()
        self.inp = nn.Linear(features, features)
        self.out = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)

        def positive(t: torch.Tensor) -> torch.Tensor:
            return torch.relu(t) * 2.0

        def negative(t: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(t) - 1.0

        h = torch.cond(h.sum() > 0, positive, negative, (h,))
        return self.out(h)


class TopKModel(nn.Module):
    """topk's values feed a linear layer, its indices feed a gather: one op, two consumers."""

    def __init__(self, features: int = 32, k: int = 8) -> None:
        super().__init__()
        self.k = k
        self.proj = nn.Linear(features, features)
        self.head = nn.Linear(k, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.proj(x)
        values, indices = torch.topk(h, self.k, dim=-1)
        picked = torch.gather(x, -1, indices)
        return self.head(values), picked * 0.5


class ThreeInputs(nn.Module):
    """An image, a feature vector and a scale: three inputs of different shapes."""

    def __init__(self, channels: int = 3, features: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, 8, 3, padding=1)
        self.fc = nn.Linear(features, 8)

    def forward(self, image: torch.Tensor, vec: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        pooled = torch.relu(self.conv(image)).mean(dim=(2, 3))
        return (pooled + self.fc(vec)) * scale


def build_cond_model(**kwargs: object) -> CondModel:
    return CondModel(**kwargs)  # type: ignore[arg-type]


def build_topk_model(**kwargs: object) -> TopKModel:
    return TopKModel(**kwargs)  # type: ignore[arg-type]


def build_three_inputs(**kwargs: object) -> ThreeInputs:
    return ThreeInputs(**kwargs)  # type: ignore[arg-type]
