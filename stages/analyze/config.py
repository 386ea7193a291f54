"""Config schema of the analyze stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AnalyzeConfig:
    """Where the data comes from (defaults: this run's files), comparators and thresholds."""

    etdump: str | None = None
    etrecord: str | None = None
    debug_buffer: str | None = None
    time_unit: str = "ms"
    comparators: list[str] = field(
        default_factory=lambda: ["mse", "mean_abs", "snr", "cosine", "max_abs"]
    )
    custom_comparator: dict[str, Any] | None = None
    delegate_metadata_parser: dict[str, Any] | None = None
    gap_metric: str = "snr"
    thresholds: dict[str, float] = field(
        default_factory=lambda: {"fp32": 60.0, "fp16": 30.0, "int8": 10.0}
    )
    top_k: int = 10
