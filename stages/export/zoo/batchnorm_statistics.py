"""BatchNorm running statistics re-estimated on representative inputs, so a randomly initialised
network's activations have a trained network's scale (unit variance after each BatchNorm).

Random init leaves running_mean 0 and running_var 1 while the activations they normalise may be
~1e-2 (Hugging Face's conv init, std 0.02) or smaller deep in the net (random-init MobileNetV3
reaches ~1e-9): int8 would then quantize them to zero. Re-estimating is what a trained network's
BatchNorm holds: the statistics of its own activations. Some inits also draw the affine weight
at the weight scale (EfficientNet's: N(0, 0.02)), which shrinks every block 50x however good
the statistics; the affine parameters are re-drawn as a trained network's spread (weight
U(0.5, 1.5), bias N(0, 0.1) per channel) before the statistics are estimated.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

Batch = Callable[[torch.Generator], tuple[torch.Tensor, ...]]


def batchnorms(model: nn.Module) -> list[_BatchNorm]:
    """The model's BatchNorm layers (1d, 2d, 3d, sync)."""
    return [m for m in model.modules() if isinstance(m, _BatchNorm)]


def redraw_affine(layers: list[_BatchNorm], generator: torch.Generator) -> None:
    """Each BatchNorm's weight U(0.5, 1.5) and bias N(0, 0.1) per channel (a trained spread)."""
    with torch.no_grad():
        for layer in layers:
            if layer.affine:
                layer.weight.copy_(0.5 + torch.rand(layer.weight.shape, generator=generator))
                layer.bias.copy_(0.1 * torch.randn(layer.bias.shape, generator=generator))


def reestimate_batchnorm(model: nn.Module, batch: Batch, batches: int = 8, seed: int = 0) -> int:
    """Re-draw every BatchNorm's affine parameters, reset its running statistics and average
    them (cumulative, momentum None) over `batches` seeded batches; only BatchNorms train, every
    other module stays in eval mode (no dropout). Returns how many BatchNorms were re-estimated;
    the model is left in eval mode."""
    layers = batchnorms(model)
    if not layers:
        return 0
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    redraw_affine(layers, generator)
    momenta = [layer.momentum for layer in layers]
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None
        layer.train()
    with torch.no_grad():
        for _ in range(batches):
            model(*batch(generator))
    for layer, momentum in zip(layers, momenta, strict=True):
        layer.momentum = momentum
    model.eval()
    return len(layers)
