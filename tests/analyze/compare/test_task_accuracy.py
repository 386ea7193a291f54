"""Task accuracy (issue 45.3): top-1 / top-5 against labels for reference and runtime, the drop
judged by max_drop, a user metric called as fn(outputs, labels), and errors that name the fix."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from stages.analyze.compare.task_accuracy import (
    CLASSIFICATION,
    Task,
    TaskAccuracyError,
    classification_scores,
    measure_task,
    task_from,
    task_metrics,
    task_option_problem,
)


def _logits(winners: list[int], classes: int = 10) -> torch.Tensor:
    """One row per winner: the winner scores 10, class k scores k/100 (a fixed ranking)."""
    rows = torch.arange(classes, dtype=torch.float32).repeat(len(winners), 1) / 100
    for row, winner in enumerate(winners):
        rows[row, winner] = 10.0
    return rows


def test_top1_and_top5_count_rows_across_samples() -> None:
    labels = [torch.tensor([1, 2]), torch.tensor([3, 9])]
    outputs = [(_logits([1, 2]),), (_logits([3, 0]),)]  # the last row's winner is wrong
    scores = classification_scores(outputs, labels)
    assert scores["top1"] == 75.0 and scores["rows"] == 4
    # Row [3, 0]: label 9 is the 2nd highest (9/100 after the winner's 10), so top-5 holds it.
    assert scores["top5"] == 100.0
    assert (
        classification_scores([(_logits([0, 1], classes=4),)], [torch.tensor([0, 3])])["top5"]
        is None
    )  # 4 classes: top-5 always holds


def test_the_drop_is_reference_minus_runtime_in_points_and_judged_by_max_drop() -> None:
    labels = [torch.tensor([1, 2, 3, 4])]
    reference = [(_logits([1, 2, 3, 4]),)]
    runtime = [(_logits([1, 2, 3, 0]),)]
    task = Task(CLASSIFICATION)
    missed = measure_task(task, reference, runtime, labels, max_drop=20.0)
    assert (missed["reference"], missed["runtime"], missed["drop"]) == (100.0, 75.0, 25.0)
    assert missed["met"] is False and "top-1 drop 25 points > max_drop 20" in missed["reason"]
    assert missed["samples"] == 1 and missed["rows"] == 4
    met = measure_task(task, reference, runtime, labels, max_drop=25.0)
    assert met["met"] is True and met["reason"] == ""
    unjudged = measure_task(task, reference, runtime, labels, max_drop=None)
    assert unjudged["met"] is None and unjudged["drop"] == 25.0
    metrics = task_metrics(missed)
    assert metrics["task_drop"] == 25.0 and metrics["task_met"] == 0.0
    assert metrics["task_top5_reference"] == 100.0


def test_a_user_metric_gets_every_sample_and_its_drop_is_in_its_units(tmp_path: Path) -> None:
    (tmp_path / "metric.py").write_text(
        "def neg_mse(outputs, labels):\n"
        "    assert isinstance(outputs, list) and isinstance(outputs[0], tuple)\n"
        "    return -sum(float(((o[0] - l) ** 2).mean()) for o, l in zip(outputs, labels))\n"
    )
    task = task_from({"_target_": "./metric.py:neg_mse"}, tmp_path)
    assert task is not None and task.name == "./metric.py:neg_mse"
    labels = [torch.zeros(3), torch.zeros(3)]
    reference = [(torch.zeros(3),), (torch.zeros(3),)]
    runtime = [(torch.ones(3),), (torch.zeros(3),)]
    record = measure_task(task, reference, runtime, labels, max_drop=0.5)
    assert record["reference"] == 0.0 and record["runtime"] == -1.0 and record["drop"] == 1.0
    assert record["met"] is False and record["unit"] == "metric units"


def test_options_and_labels_that_cannot_give_a_score_are_named(tmp_path: Path) -> None:
    assert task_option_problem("classification") is None
    assert task_option_problem({"_target_": None}) is None
    assert "give classification" in str(task_option_problem("clasification"))
    assert task_from({"_target_": None}, tmp_path) is None
    with pytest.raises(TaskAccuracyError, match=r"defines no 'nope'"):
        (tmp_path / "m.py").write_text("def fn(o, l):\n    return 1.0\n")
        task_from({"_target_": "./m.py:nope"}, tmp_path)
    task = Task(CLASSIFICATION)
    outputs = [(_logits([1, 2]),)]
    with pytest.raises(TaskAccuracyError, match="hold 3 label"):
        measure_task(task, outputs, outputs, [torch.tensor([1, 2, 3])], None)
    with pytest.raises(TaskAccuracyError, match="class indices"):
        measure_task(task, outputs, outputs, [torch.tensor([1.0, 2.0])], None)
    with pytest.raises(TaskAccuracyError, match="outside the first output's 10 classes"):
        measure_task(task, outputs, outputs, [torch.tensor([1, 12])], None)
    with pytest.raises(TaskAccuracyError, match="labels hold 2 sample"):
        measure_task(task, outputs, outputs, [torch.tensor([1, 2])] * 2, None)
    broken = Task("./m.py:fn", lambda outputs, labels: "not a number")
    with pytest.raises(TaskAccuracyError, match="returned no number"):
        measure_task(broken, outputs, outputs, [torch.tensor([1, 2])], None)


def test_fewer_runtime_samples_than_labels_is_not_evaluated_not_a_miss() -> None:
    outputs = [(_logits([1, 2]),), (_logits([1, 2]),)]
    labels = [torch.tensor([1, 2])] * 2
    record = measure_task(Task(CLASSIFICATION), outputs, outputs[:1], labels, max_drop=1.0)
    assert record["met"] is None and "1 of the 2" in record["reason"]
    assert not math.isnan(record["budget"]["max_drop"])
