"""analyze.task, analyze.labels and analyze.accuracy_budget.max_drop mistakes stop before any
stage runs, naming the option and what to give."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from pipeline.errors import ConfigValueError
from pipeline.runner import run_pipeline


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["analyze.task=top1"], r"analyze.task='top1': give classification"),
        (
            ["analyze.accuracy_budget.max_drop=1"],
            r"max_drop=1.0 judges a task score: set analyze.task=classification",
        ),
        (
            ["analyze.task=classification", "analyze.accuracy_budget.max_drop=-1"],
            r"max_drop=-1.0: give a finite drop >= 0",
        ),
        (
            ["analyze.task=classification", "analyze.labels=absent_labels.pt"],
            r"analyze.labels=absent_labels.pt: no such file",
        ),
        (
            ["analyze.task._target_=./absent_metric.py:fn"],
            r"analyze.task._target_=./absent_metric.py:fn: no such file",
        ),
        (
            ["analyze.task=classification"],
            r"analyze.task needs labels, and inputs=random samples have none",
        ),
        (
            ["analyze.task=classification", "runtime.generate.prompt_tokens=4"],
            r"analyze.task with runtime.generate.\*: a generation's outputs",
        ),
        (
            ["analyze.task._target_=stages.export.zoo.digits.no_such_metric"],
            r"defines no 'no_such_metric' \(it defines: .*build_digits_cnn",
        ),
    ],
)
def test_task_option_mistakes_fail_before_any_stage(
    make_cfg: Callable[..., DictConfig], overrides: list[str], message: str
) -> None:
    cfg = make_cfg("model=mlp", "tracking=none", *overrides)
    with pytest.raises(ConfigValueError, match=message):
        run_pipeline(cfg, print_summary=False)
    assert not Path(cfg.run_dir).exists()
