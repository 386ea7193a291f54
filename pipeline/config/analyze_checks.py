"""The analyze group's own options, checked before any stage."""

from __future__ import annotations

import math
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ConfigValueError
from stages.analyze.compare.task_accuracy import (
    TARGET_OPTION,
    TASK_OPTION,
    task_option_problem,
    task_target,
)
from stages.dotted_import import given_spec
from stages.export.config import InputsSource
from stages.python_target import missing_target_name, split_file_target


def check_analyze_options(cfg: DictConfig, stages: list[str], source: InputsSource | None) -> None:
    """Every analyze rule a schema cannot express; raises ConfigValueError. `source`: where the
    samples come from (None when the export stage does not run)."""
    if "analyze" in stages:
        check_gap_metric(cfg)
        check_task_options(cfg, Path.cwd())
        check_task_has_labels(cfg, source)


def check_gap_metric(cfg: DictConfig) -> None:
    """`analyze.gap_metric` names a listed comparator (or, with a custom one, maybe its name)."""
    analyze = cfg.analyze
    listed = [str(name) for name in analyze.comparators]
    custom = OmegaConf.to_container(analyze, resolve=True).get("custom_comparator")  # type: ignore[union-attr]
    if str(analyze.gap_metric) in listed or given_spec(custom) is not None:
        return
    raise ConfigValueError(
        f"analyze.gap_metric={analyze.gap_metric!s} is not among analyze.comparators={listed}; "
        "pick one of those, add it to analyze.comparators, or set analyze.custom_comparator"
    )


def check_task_options(cfg: DictConfig, base_dir: Path) -> None:
    """`analyze.task` is classification or a metric its source defines, `max_drop` comes with a
    task and is a drop >= 0, `analyze.labels` names a file (relative paths from `base_dir`)."""
    option = OmegaConf.to_container(cfg.analyze, resolve=True).get("task")  # type: ignore[union-attr]
    problem = task_option_problem(option)
    if problem:
        raise ConfigValueError(problem)
    target = task_target(option)
    if target is not None:
        _check_metric_defined(target, base_dir)
    max_drop = cfg.analyze.accuracy_budget.get("max_drop")
    if max_drop is not None and (option is None or (target is None and option != "classification")):
        raise ConfigValueError(
            f"analyze.accuracy_budget.max_drop={max_drop} judges a task score: set "
            f"{TASK_OPTION}=classification or {TARGET_OPTION}=... too, or drop max_drop"
        )
    if max_drop is not None and not (math.isfinite(float(max_drop)) and float(max_drop) >= 0):
        raise ConfigValueError(
            f"analyze.accuracy_budget.max_drop={max_drop}: give a finite drop >= 0 (percentage "
            "points for classification's top-1, the metric's units for yours)"
        )
    generate = OmegaConf.select(cfg, "runtime.generate.prompt_tokens")
    if (option == "classification" or target is not None) and generate is not None:
        raise ConfigValueError(
            f"{TASK_OPTION} with runtime.generate.*: a generation's outputs are its steps' "
            "logits, not one output per labelled sample; leave one of them unset"
        )
    labels = cfg.analyze.get("labels")
    if labels and not (base_dir / Path(str(labels)).expanduser()).is_file():
        raise ConfigValueError(
            f"analyze.labels={labels}: no such file (a relative path is taken from the directory "
            "you ran the command in); give labels.pt's form: one (label_tensor,) per sample"
        )


def check_task_has_labels(cfg: DictConfig, source: InputsSource | None) -> None:
    """A task on seeded random samples (which carry no labels) without analyze.labels stops
    here, not after the export, lower and run stages."""
    task = OmegaConf.to_container(cfg.analyze, resolve=True).get("task")  # type: ignore[union-attr]
    if task_option_problem(task) or (task != "classification" and task_target(task) is None):
        return
    if source == InputsSource.random and not cfg.analyze.get("labels"):
        raise ConfigValueError(
            f"{TASK_OPTION} needs labels, and inputs=random samples have none: give samples "
            "that carry them (inputs=loader with a function yielding (inputs, label), or "
            "inputs=files with a `labels` member), or analyze.labels=PATH"
        )


def _check_metric_defined(target: str, base_dir: Path) -> None:
    """The metric's file exists and defines it (read without running it)."""
    split = split_file_target(target)
    if split is not None and not (base_dir / Path(split[0]).expanduser()).is_file():
        raise ConfigValueError(
            f"{TARGET_OPTION}={target}: no such file {split[0]} (a relative path is taken from "
            "the directory you ran the command in)"
        )
    missing = missing_target_name(target, base_dir)
    if missing is not None:
        source, name, defined = missing
        raise ConfigValueError(
            f"{TARGET_OPTION}={target}: {source} defines no {name!r} (it defines: "
            f"{', '.join(defined) or 'nothing public'}); give fn(outputs, labels) -> float"
        )
