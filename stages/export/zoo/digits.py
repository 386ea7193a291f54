"""A small CNN trained at build time on scikit-learn's handwritten digits, and their held-out splits.

`load_digits` ships inside scikit-learn (1,797 labelled 8x8 images, nothing downloaded). One
seeded shuffle cuts them into three disjoint splits: training (the CNN learns on it, a few
seconds on a CPU, deterministic), calibration and evaluation (what `digits_samples` yields, for
a quantizer's calibration and for task accuracy). Pixel values 0..16 are scaled to [0, 1].
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch
from torch import nn

CLASSES = 10
SIDE = 8  # pixels per side
SPLIT_SEED = 0
# The seeded shuffle's split sizes: training gets the rest (1,797 - 720 = 1,077 images).
HELD_OUT = {"calibration": 360, "evaluation": 360}
TRAIN_EPOCHS = 12
TRAIN_BATCH = 64


class DigitsDataError(ValueError):
    """A digits split or batch that does not exist; the message names the argument."""


class DigitsCNN(nn.Module):
    """conv → relu → conv → relu → maxpool → linear → relu → linear: logits of 10 digits."""

    def __init__(self, channels: int = 16, hidden: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels // 2, 3, padding=1)
        self.conv2 = nn.Conv2d(channels // 2, channels, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(channels * (SIDE // 2) ** 2, hidden)
        self.fc2 = nn.Linear(hidden, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv2(torch.relu(self.conv1(x)))))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


@functools.cache
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    """Every image as [N, 1, 8, 8] float in [0, 1] and its label [N] int64, in the seeded order."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(data.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SPLIT_SEED))
    return images[order], labels[order]


def split(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(images, labels) of the split `name`: training, calibration or evaluation (disjoint)."""
    images, labels = _digits()
    held = sum(HELD_OUT.values())
    bounds = {
        "training": (0, len(labels) - held),
        "calibration": (len(labels) - held, len(labels) - HELD_OUT["evaluation"]),
        "evaluation": (len(labels) - HELD_OUT["evaluation"], len(labels)),
    }
    if name not in bounds:
        raise DigitsDataError(
            f"split={name!r}: the digits splits are {', '.join(bounds)} (training is the CNN's "
            "own; calibration and evaluation are held out from it)"
        )
    start, end = bounds[name]
    return images[start:end], labels[start:end]


@functools.cache
def _trained_state(channels: int, hidden: int, seed: int) -> dict[str, torch.Tensor]:
    """The CNN's weights after training on the training split (seeded, single-threaded and with
    deterministic algorithms, so every build gives the same weights)."""
    images, labels = split("training")
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)  # a reduction's order, hence the weights, depends on the threads
    torch.use_deterministic_algorithms(True)
    try:
        generator = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = DigitsCNN(channels, hidden)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(TRAIN_EPOCHS):
            for batch in torch.randperm(len(labels), generator=generator).split(TRAIN_BATCH):
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(images[batch]), labels[batch])
                loss.backward()
                optimizer.step()
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def build_digits_cnn(channels: int = 16, hidden: int = 64, seed: int = 0) -> DigitsCNN:
    """The CNN trained on the digits' training split (trained once per process and arguments)."""
    model = DigitsCNN(channels, hidden)
    model.load_state_dict(_trained_state(channels, hidden, seed))
    return model.eval()


def digits_samples(
    split_name: str = "held_out", batch: int = 8, count: int | None = None
) -> Iterator[tuple[tuple[torch.Tensor], torch.Tensor]]:
    """`((images [batch, 1, 8, 8],), labels [batch])` over held-out digits in their seeded order:
    `calibration`, `evaluation`, or `held_out` (calibration's batches, then evaluation's: a loader
    whose first samples calibrate and the next are judged gets each from its own split). A
    split's last partial batch is left out (a program's input shape is fixed); `count`: at most
    that many samples."""
    names = {"held_out": ("calibration", "evaluation"), "calibration": ("calibration",)}
    names["evaluation"] = ("evaluation",)
    if split_name not in names:
        raise DigitsDataError(
            f"split_name={split_name!r}: give held_out, calibration or evaluation (the training "
            "split is the CNN's own and never yielded)"
        )
    if batch < 1 or (count is not None and count < 1):
        raise DigitsDataError(f"batch={batch}, count={count}: give positive numbers")
    yielded = 0
    for name in names[split_name]:
        images, labels = split(name)
        for index in range(len(labels) // batch):
            if count is not None and yielded >= count:
                return
            rows = slice(index * batch, (index + 1) * batch)
            yield (images[rows].clone(),), labels[rows].clone()
            yielded += 1
