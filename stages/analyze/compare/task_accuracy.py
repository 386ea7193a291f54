"""Task accuracy against labels (`analyze.task`): the float reference's score and the runtime's on
the same samples, and the drop between them, judged by `analyze.accuracy_budget.max_drop`.

`classification`: top-1 and top-5 (percent) of the first output's rows (`[..., classes]`) against
integer labels, one per row; the top-1 drop, in percentage points, is judged. A user metric
(`analyze.task._target_=pkg.mod.fn` or `./file.py:fn`) is called as `fn(outputs, labels) ->
float`, higher is better: `outputs` a list with one tuple of output tensors per sample (the
program's outputs, flattened), `labels` a list with one label tensor per sample; its drop is in
its own units.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from stages.python_target import import_target

CLASSIFICATION = "classification"
TASK_OPTION = "analyze.task"
TARGET_OPTION = "analyze.task._target_"
TOP5 = 5

Metric = Callable[[list[tuple[torch.Tensor, ...]], list[torch.Tensor]], Any]


class TaskAccuracyError(ValueError):
    """A task option, labels file or metric that cannot give a task score; says what to do."""

    fix_the_command = True  # running the same command again repeats the mistake


@dataclass(frozen=True)
class Task:
    """What `analyze.task` asks for: classification (metric None) or a user metric."""

    name: str
    metric: Metric | None = None


def task_target(option: Any) -> str | None:
    """The `_target_` of a user metric option, None for classification or no task."""
    if isinstance(option, Mapping):
        target = option.get("_target_")
        return None if target is None else str(target)
    return None


def task_option_problem(option: Any) -> str | None:
    """What is wrong with an `analyze.task` value, or None (read without importing anything)."""
    if option is None or option == CLASSIFICATION:
        return None
    if isinstance(option, Mapping):
        extra = sorted(str(k) for k in option if k != "_target_")
        if not extra:
            return None
        return f"{TASK_OPTION} has keys {extra}: a user metric takes only _target_"
    return (
        f"{TASK_OPTION}={option!r}: give {CLASSIFICATION} (top-1 and top-5 of the first output) "
        f"or {TARGET_OPTION}=pkg.mod.fn (or ./file.py:fn) for your own fn(outputs, labels) -> float"
    )


def task_from(option: Any, base_dir: Path) -> Task | None:
    """The task `analyze.task` names (its metric imported), None when it is off."""
    problem = task_option_problem(option)
    if problem:
        raise TaskAccuracyError(problem)
    if option == CLASSIFICATION:
        return Task(CLASSIFICATION)
    target = task_target(option)
    if target is None:
        return None
    metric = import_target(target, TARGET_OPTION, base_dir, TaskAccuracyError)
    if not callable(metric):
        raise TaskAccuracyError(
            f"{TARGET_OPTION}={target!r} is a {type(metric).__name__}, not a function "
            "fn(outputs, labels) -> float"
        )
    return Task(target, metric)


def _class_rows(output: Any, label: torch.Tensor, sample: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits [rows, classes], labels [rows]) of one sample; a clear error when they do not fit."""
    if not isinstance(output, torch.Tensor) or not output.is_floating_point() or output.dim() < 1:
        raise TaskAccuracyError(
            f"{TASK_OPTION}={CLASSIFICATION}: sample {sample}'s first output is not a float "
            "tensor of class scores [..., classes]; use a user metric "
            f"({TARGET_OPTION}=...) for this model"
        )
    classes = output.shape[-1]
    logits = output.detach().float().reshape(-1, classes)
    if label.is_floating_point() or label.is_complex() or label.dtype == torch.bool:
        raise TaskAccuracyError(
            f"labels of sample {sample} are {label.dtype}: {CLASSIFICATION} labels are class "
            "indices (an integer tensor, one per row of the first output)"
        )
    rows = label.reshape(-1).long()
    if rows.numel() != logits.shape[0]:
        raise TaskAccuracyError(
            f"labels of sample {sample} hold {rows.numel()} label(s), its first output "
            f"{list(output.shape)} has {logits.shape[0]} row(s) of {classes} classes: give one "
            "class index per row"
        )
    if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= classes):
        raise TaskAccuracyError(
            f"labels of sample {sample} hold class {int(rows.min())}..{int(rows.max())}, outside "
            f"the first output's {classes} classes (0..{classes - 1})"
        )
    return logits, rows


def classification_scores(
    outputs: Sequence[Sequence[Any]], labels: Sequence[torch.Tensor]
) -> dict[str, float | int | None]:
    """Top-1 and top-5 in percent over every labelled row (top-5 None under 6 classes, where it
    is always 100), and the rows counted."""
    hits1 = hits5 = rows = 0
    classes = 0
    for sample, (output, label) in enumerate(zip(outputs, labels, strict=True)):
        logits, wanted = _class_rows(output[0] if len(output) else None, label, sample)
        classes = logits.shape[1]
        ranked = logits.topk(min(TOP5, classes), dim=-1).indices
        hits1 += int((ranked[:, 0] == wanted).sum())
        hits5 += int((ranked == wanted[:, None]).any(-1).sum())
        rows += len(wanted)
    if not rows:
        return {"top1": None, "top5": None, "rows": 0}
    top5 = 100.0 * hits5 / rows if classes > TOP5 else None
    return {"top1": 100.0 * hits1 / rows, "top5": top5, "rows": rows}


def metric_score(task: Task, outputs: Sequence[Sequence[Any]], labels: list[torch.Tensor]) -> float:
    """The user metric on these outputs; errors name the option."""
    if task.metric is None:
        raise TaskAccuracyError(f"{TASK_OPTION}={task.name!r} has no metric function")
    try:
        value = task.metric([tuple(o) for o in outputs], list(labels))
        return float(value.item() if isinstance(value, torch.Tensor) else value)
    except TaskAccuracyError:
        raise
    except Exception as exc:
        raise TaskAccuracyError(
            f"{TARGET_OPTION}={task.name!r}: fn(outputs, labels) failed or returned no number: "
            f"{type(exc).__name__}: {exc} (it gets a list of per-sample output tuples and a "
            "list of label tensors and returns a float, higher is better)"
        ) from exc


def _score_pair(
    task: Task,
    reference: Sequence[Sequence[Any]],
    runtime: Sequence[Sequence[Any]],
    labels: list[torch.Tensor],
) -> dict[str, Any]:
    """The judged score of reference and runtime, their drop; classification's top-5 beside."""
    if task.metric is not None:
        ref, rt = metric_score(task, reference, labels), metric_score(task, runtime, labels)
        return {"judged": "value", "unit": "metric units", "reference": ref, "runtime": rt}
    ref_scores = classification_scores(reference, labels)
    rt_scores = classification_scores(runtime, labels)
    found: dict[str, Any] = {
        "judged": "top1",
        "unit": "points",
        "reference": ref_scores["top1"],
        "runtime": rt_scores["top1"],
        "rows": ref_scores["rows"],
    }
    if ref_scores["top5"] is not None and rt_scores["top5"] is not None:
        found["top5"] = {
            "reference": ref_scores["top5"],
            "runtime": rt_scores["top5"],
            "drop": float(ref_scores["top5"]) - float(rt_scores["top5"]),
        }
    return found


def measure_task(
    task: Task,
    reference: Sequence[Sequence[Any]],
    runtime: Sequence[Sequence[Any]],
    labels: list[torch.Tensor],
    max_drop: float | None,
) -> dict[str, Any]:
    """summary.json `accuracy.task`: name, reference, runtime, drop, samples, budget, met."""
    record: dict[str, Any] = {
        "name": task.name,
        "samples": len(labels),
        "budget": {"max_drop": max_drop},
        "met": None,
        "reason": "",
    }
    if len(reference) != len(labels):
        raise TaskAccuracyError(
            f"the labels hold {len(labels)} sample(s), the analysed run {len(reference)}: the "
            "labels must be the run's own (one (label,) per sample of inputs.pt, in its order)"
        )
    if len(runtime) != len(labels):
        record["reason"] = (
            f"not evaluated: the runtime logged the outputs of {len(runtime)} of the "
            f"{len(labels)} labelled samples"
        )
        return record
    record |= _score_pair(task, reference, runtime, labels)
    if record["reference"] is None or record["runtime"] is None:
        record["reason"] = "not evaluated: no labelled row"
        return record
    record["drop"] = float(record["reference"]) - float(record["runtime"])
    _judge(record, max_drop)
    return record


def _judge(record: dict[str, Any], max_drop: float | None) -> None:
    """`met` against max_drop (None: reported, not judged); the reason when missed."""
    if max_drop is None:
        return
    drop = record["drop"]
    record["met"] = math.isfinite(drop) and drop <= max_drop
    if not record["met"]:
        what = "top-1" if record["judged"] == "top1" else record["name"]
        record["reason"] = (
            f"task {what} drop {drop:.4g} {record['unit']} > max_drop {max_drop:g} "
            f"(reference {record['reference']:.4g}, runtime {record['runtime']:.4g})"
        )


def task_metrics(record: dict[str, Any] | None) -> dict[str, float]:
    """MLflow metrics of the task record: task_reference, task_runtime, task_drop, task_met,
    and classification's task_top5_* (finite values only)."""
    if not record:
        return {}
    metrics: dict[str, float] = {}
    for key in ("reference", "runtime", "drop"):
        value = record.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            metrics[f"task_{key}"] = float(value)
    for key, value in (record.get("top5") or {}).items():
        if isinstance(value, int | float) and math.isfinite(value):
            metrics[f"task_top5_{key}"] = float(value)
    if record.get("met") is not None:
        metrics["task_met"] = 1.0 if record["met"] else 0.0
    return metrics
