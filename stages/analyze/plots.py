"""PNG plots: top ops by p50; accumulated and local gap along the graph with threshold and verdict."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

from stages.formats.atomic_write import atomic_path

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def save_figure(fig: plt.Figure, path: Path) -> None:
    """Save a PNG atomically and free the figure."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_top_ops(
    path: Path, labels: list[str], p50: list[float], delegated: list[bool], unit: str
) -> None:
    fig, ax = plt.subplots(figsize=(8, 0.35 * max(len(labels), 3) + 1))
    colors = ["#3b7dd8" if d else "#e08a2c" for d in delegated]
    ax.barh(range(len(labels)), p50, color=colors)
    ax.set_yticks(range(len(labels)), [lab[:60] for lab in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"p50 ({unit})")
    ax.set_title("Slowest ops (blue: inside a delegate, orange: operator)")
    save_figure(fig, path)


def _clip(values: list[float], floor: float, ceiling: float) -> list[float]:
    out = []
    for v in values:
        if math.isnan(v):
            out.append(floor)
        else:
            out.append(min(max(v, floor), ceiling))
    return out


def plot_gap(
    path: Path,
    accumulated: list[float],
    local: list[float],
    threshold: float | None,
    metric: str,
    first_divergence: int | None,
) -> None:
    """x: compared outputs in graph order. Non-finite values are clipped to the plot's edges."""
    finite = [v for v in accumulated + local if math.isfinite(v)]
    lo = min([*finite, threshold if threshold is not None else 0.0], default=0.0)
    hi = max([*finite, threshold if threshold is not None else 1.0], default=1.0)
    pad = (hi - lo) * 0.1 or 1.0
    floor, ceiling = lo - pad, hi + pad
    xs = list(range(len(accumulated)))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(xs, _clip(accumulated, floor, ceiling), label="accumulated gap", color="#3b7dd8")
    ax.plot(xs, _clip(local, floor, ceiling), label="local gap", color="#2ca25f", linestyle="--")
    if threshold is not None:
        ax.axhline(threshold, color="#d62728", linewidth=1, label=f"threshold {threshold:g}")
    if first_divergence is not None:
        ax.axvline(first_divergence, color="#d62728", linestyle=":", label="first divergence")
    ax.set_xlabel("compared output (graph order)")
    ax.set_ylabel(metric)
    ax.set_ylim(floor, ceiling)
    ax.set_title(f"Numeric gap along the graph ({metric}; ∞ drawn at the top edge)")
    ax.legend(loc="best", fontsize=8)
    save_figure(fig, path)
