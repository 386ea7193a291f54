"""The accuracy record as terminal and report lines: the task's scores, drop and budget."""

from __future__ import annotations

from stages.analyze.report.accuracy_lines import (
    accuracy_headline,
    accuracy_output_lines,
    task_line,
)


def _record(task: dict[str, object]) -> dict[str, object]:
    return {
        "budget": {"snr_db": 20.0, "top1_agreement": None},
        "outputs": [],
        "met": task.get("met"),
        "reason": task.get("reason", ""),
        "task": task,
    }


def test_a_judged_classification_task_shows_scores_drop_and_budget() -> None:
    task = {
        "name": "classification",
        "samples": 15,
        "judged": "top1",
        "unit": "points",
        "reference": 97.5,
        "runtime": 95.0,
        "drop": 2.5,
        "top5": {"reference": 100.0, "runtime": 99.5, "drop": 0.5},
        "budget": {"max_drop": 1.0},
        "met": False,
        "reason": "task top-1 drop 2.5 points > max_drop 1 (reference 97.5, runtime 95)",
    }
    record = _record(task)
    assert accuracy_headline(record).startswith(
        "accuracy: budget MISSED (SNR >= 20 dB, top-1 drop <= 1): task top-1 drop 2.5"
    )
    assert accuracy_output_lines(record)[-1] == (
        "task classification, 15 samples: top-1 97.50% -> 95.00% (drop 2.5 points, max 1: "
        "MISSED); top-5 100.00% -> 99.50%"
    )


def test_a_user_metric_unjudged_and_a_task_not_evaluated() -> None:
    metric = {
        "name": "./metric.py:fn",
        "samples": 4,
        "judged": "value",
        "unit": "metric units",
        "reference": 0.8,
        "runtime": 0.75,
        "drop": 0.05,
        "budget": {"max_drop": None},
        "met": None,
    }
    assert task_line(metric) == (
        "task ./metric.py:fn, 4 samples: score 0.8 -> 0.75 (drop 0.05 metric units, not judged)"
    )
    # summary.json writes a metric's NaN as the string "nan": shown as it is, never a crash.
    assert "(drop nan metric units" in task_line(metric | {"runtime": "nan", "drop": "nan"})
    absent = {"name": "classification", "samples": 4, "reason": "not evaluated: no ETRecord"}
    assert task_line(absent) == "task classification, 4 samples: not evaluated: no ETRecord"
    assert task_line(None) == ""
