"""The analyze group's own options, checked before any stage."""

from __future__ import annotations

from omegaconf import DictConfig

from pipeline.errors import ConfigValueError


def check_analyze_options(cfg: DictConfig, stages: list[str]) -> None:
    """Every analyze rule a schema cannot express; raises ConfigValueError."""
    if "analyze" in stages:
        check_gap_metric(cfg)


def check_gap_metric(cfg: DictConfig) -> None:
    """`analyze.gap_metric` names a listed comparator (or, with a custom one, maybe its name)."""
    analyze = cfg.analyze
    listed = [str(name) for name in analyze.comparators]
    if str(analyze.gap_metric) in listed or analyze.get("custom_comparator"):
        return
    raise ConfigValueError(
        f"analyze.gap_metric={analyze.gap_metric!s} is not among analyze.comparators={listed}; "
        "pick one of those, add it to analyze.comparators, or set analyze.custom_comparator"
    )
