"""The generation's gap against step and layer: two heat maps (SVG), the worst local excess over
expected error of each layer's ops per captured step, and each layer's KV cache SNR per step."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from stages.analyze.report.plots import _figure, _save


def _grid(
    cells: dict[tuple[str, int], float], layers: Sequence[str], steps: Sequence[int]
) -> list[list[float]]:
    return [[cells.get((layer, step), math.nan) for step in steps] for layer in layers]


def _panel(figure: object, position: int, grid: list[list[float]], labels: tuple[str, ...]) -> None:
    layers, steps, title, colorbar = labels
    axes = figure.add_subplot(2, 1, position)  # type: ignore[attr-defined]
    axes.set_title(title)
    if not layers or not steps:  # e.g. no step logged its caches
        axes.text(0.5, 0.5, "nothing recorded", ha="center", va="center")
        axes.set_axis_off()
        return
    finite = [v for row in grid for v in row if math.isfinite(v)]
    clipped = [[v if math.isfinite(v) or math.isnan(v) else 300.0 for v in row] for row in grid]
    image = axes.imshow(
        clipped,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=min(finite, default=0.0),
        vmax=max(finite, default=1.0),
    )
    axes.set_yticks(range(len(layers)), labels=layers)
    axes.set_xticks(range(len(steps)), labels=steps)
    axes.set_xlabel("step (0: prefill)")
    figure.colorbar(image, ax=axes, label=colorbar)  # type: ignore[attr-defined]


def plot_generation_gap(
    path: Path,
    op_excess: dict[tuple[str, int], float],
    cache_snr: dict[tuple[str, int], float],
) -> None:
    """Heat maps keyed (layer, step): op excess in dB (higher is worse), cache SNR in dB."""
    with _figure(10.0, 6.4) as figure:
        for position, (cells, title, unit) in enumerate(
            (
                (op_excess, "Worst local error over expected, per layer and step", "excess dB"),
                (cache_snr, "KV cache SNR against the reference, per layer and step", "SNR dB"),
            ),
            start=1,
        ):
            layers = sorted({layer for layer, _ in cells})
            steps = sorted({step for _, step in cells})
            labels = (tuple(layers), tuple(str(s) for s in steps), title, unit)
            _panel(figure, position, _grid(cells, layers, steps), labels)  # type: ignore[arg-type]
        _save(figure, path)
