"""Task accuracy in the analysis: the task and its labels resolved before any work (a missing
labels file is an error then, not after the analysis), and the task record folded into
summary.json's accuracy record, whose `met` (exit code 5, the searches) it then shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from stages.analyze.compare.task_accuracy import (
    TASK_OPTION,
    Task,
    TaskAccuracyError,
    measure_task,
    task_from,
)
from stages.analyze.config import AnalyzeConfig
from stages.analyze.load.labels import LABELS_OPTION, read_labels

TASK_KEY = "task"  # the task record's key in summary.json's accuracy record


@dataclass(frozen=True)
class TaskInputs:
    """The task, its labels (one tensor per sample) and the file they came from."""

    task: Task
    labels: list[torch.Tensor]
    source: str


def task_inputs(cfg: AnalyzeConfig, labels: Path | None, base_dir: Path) -> TaskInputs | None:
    """The task `analyze.task` asks for and its labels; None when no task is set."""
    task = task_from(cfg.task, base_dir)
    if task is None:
        return None
    if labels is None:
        raise TaskAccuracyError(
            f"{TASK_OPTION}={task.name} needs labels, and this run has none: the export stage "
            "writes labels.pt when the samples carry labels (a loader yielding (inputs, label)); "
            f"for files of your own give {LABELS_OPTION}=PATH (one (label_tensor,) per sample, "
            f"in the order of inputs.pt), or leave {TASK_OPTION} unset"
        )
    return TaskInputs(task, read_labels(labels), str(labels))


def not_evaluated(found: TaskInputs, max_drop: float | None, why: str) -> dict[str, Any]:
    """The task record of an analysis that could not compute it."""
    return {
        "name": found.task.name,
        "samples": len(found.labels),
        "budget": {"max_drop": max_drop},
        "met": None,
        "reason": f"not evaluated: {why}",
        "labels": found.source,
    }


def task_record(
    found: TaskInputs,
    logged: Sequence[Sequence[Any]],
    references: Sequence[Sequence[Any]],
    max_drop: float | None,
) -> dict[str, Any]:
    """The task record of the reference outputs and the runtime's logged ones."""
    if not logged:
        return not_evaluated(found, max_drop, "the ETDump holds no program outputs")
    runtime = logged[: len(references)]  # capture blocks come first, one per sample
    record = measure_task(found.task, references, runtime, found.labels, max_drop)
    record["labels"] = found.source
    return record


def fold_task(accuracy: dict[str, Any], record: dict[str, Any]) -> None:
    """accuracy['task'] = record; a missed task budget makes the whole record missed."""
    accuracy[TASK_KEY] = record
    if record.get("met") is False:
        accuracy["met"] = False
        accuracy["reason"] = "; ".join(r for r in (accuracy.get("reason"), record["reason"]) if r)
    elif record.get("met") is True and accuracy.get("met") is None:
        accuracy["met"] = True
