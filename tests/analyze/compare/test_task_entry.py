"""Task accuracy in the analysis: a task with no labels stops before any work with the fix, and
a missed task budget makes summary.json's accuracy record missed (exit 5, the searches)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from stages.analyze.compare.task_entry import (
    TaskAccuracyError,
    fold_task,
    task_inputs,
    task_record,
)
from stages.analyze.config import AnalyzeConfig
from stages.formats.samples import write_samples


def _labels_file(tmp_path: Path) -> Path:
    path = tmp_path / "labels.pt"
    write_samples([(torch.tensor([0, 1]),)], path)
    return path


def test_a_task_without_labels_names_both_ways_to_give_them(tmp_path: Path) -> None:
    assert task_inputs(AnalyzeConfig(), None, tmp_path) is None  # no task: nothing needed
    with pytest.raises(TaskAccuracyError, match=r"analyze.labels=PATH.*or leave analyze.task"):
        task_inputs(AnalyzeConfig(task="classification"), None, tmp_path)
    found = task_inputs(AnalyzeConfig(task="classification"), _labels_file(tmp_path), tmp_path)
    assert found is not None and found.task.name == "classification"
    assert [t.tolist() for t in found.labels] == [[0, 1]]


def test_a_missed_task_makes_the_accuracy_record_missed_and_says_why(tmp_path: Path) -> None:
    found = task_inputs(AnalyzeConfig(task="classification"), _labels_file(tmp_path), tmp_path)
    assert found is not None
    right = torch.tensor([[5.0, 0.0], [0.0, 5.0]])
    wrong = torch.tensor([[5.0, 0.0], [5.0, 0.0]])
    accuracy = {"met": True, "reason": ""}
    fold_task(accuracy, task_record(found, [[wrong]], [(right,)], max_drop=10.0))
    assert accuracy["met"] is False and accuracy["task"]["drop"] == 50.0
    assert "top-1 drop 50 points > max_drop 10" in accuracy["reason"]
    assert accuracy["task"]["labels"] == str(tmp_path / "labels.pt")
    kept = {"met": True, "reason": ""}
    fold_task(kept, task_record(found, [[right]], [(right,)], max_drop=10.0))
    assert kept["met"] is True and kept["task"]["met"] is True
    nothing = {"met": None, "reason": "no outputs"}
    fold_task(nothing, task_record(found, [], [(right,)], max_drop=10.0))
    assert nothing["met"] is None and "no program outputs" in nothing["task"]["reason"]
