"""The timed executions' budget: at least min_iterations, at most iterations, stop once
max_time_s is spent; the run stage writes as many timed blocks as it ran."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from pipeline.errors import ConfigValueError
from pipeline.runner import run_pipeline
from stages.formats.etdump import read_etdump
from stages.run.iteration_budget import IterationBudget, IterationBudgetError
from stages.run.stage import CAPTURE_BLOCK, TIMED_BLOCK


def _count(budget: IterationBudget, seconds: float) -> int:
    while budget.more():
        budget.record(seconds)
    return budget.done


def test_a_slow_model_stops_once_the_time_is_spent_but_not_before_the_minimum() -> None:
    assert _count(IterationBudget(10, 5, 1.0), 0.3) == 5  # 1.5 s spent by the 5th
    assert _count(IterationBudget(10, 2, 1.0), 0.3) == 4  # 0.9 s after 3, so a 4th
    assert _count(IterationBudget(10, 5, 1.0), 0.01) == 10  # a fast model runs them all
    budget = IterationBudget(10, 5, None)
    assert _count(budget, 100.0) == 10 and not budget.stopped_early


def test_the_minimum_never_exceeds_the_maximum() -> None:
    budget = IterationBudget(3, 5, 1.0)
    assert _count(budget, 10.0) == 3 and not budget.stopped_early


@pytest.mark.parametrize(
    ("iterations", "minimum", "max_time", "option"),
    [
        (0, 5, 1.0, "runtime.iterations"),
        (10, 0, 1.0, "runtime.min_iterations"),
        (10, 5, 0.0, "runtime.max_time_s"),
        (10, 5, float("nan"), "runtime.max_time_s"),
    ],
)
def test_bad_values_name_the_option(
    iterations: int, minimum: int, max_time: float, option: str
) -> None:
    with pytest.raises(IterationBudgetError, match=option):
        IterationBudget(iterations, minimum, max_time)


@pytest.mark.parametrize(
    ("budget", "timed"),
    [
        # Any execution outlasts 1 ns, so the budget is spent after the minimum of 2.
        (("runtime.iterations=6", "runtime.min_iterations=2", "runtime.max_time_s=1e-9"), 2),
        # No time budget: every iteration runs.
        (("runtime.iterations=4", "runtime.min_iterations=1", "runtime.max_time_s=null"), 4),
    ],
    ids=["time-spent", "no-budget"],
)
def test_the_run_stage_writes_one_timed_block_per_execution_it_made(
    tiny_cfg: Callable[..., DictConfig], budget: tuple[str, ...], timed: int
) -> None:
    cfg = tiny_cfg("mlp", "stages=[export,lower,run]", "tracking=none", *budget)
    result = run_pipeline(cfg, print_summary=False)
    dump = read_etdump(result.run_dir / "etdump.etdp")
    assert [b.name for b in dump.run_data].count(TIMED_BLOCK) == timed
    assert result.artifacts("run").metrics["iterations"] == float(timed)
    # The capture executions come first: they are the warm-up.
    names = [b.name for b in dump.run_data if b.name in (TIMED_BLOCK, CAPTURE_BLOCK)]
    assert names[0] == CAPTURE_BLOCK and names[-1] == TIMED_BLOCK


def test_a_bad_budget_is_refused_before_anything_runs(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = tiny_cfg("mlp", "stages=[export,lower,run]", "runtime.max_time_s=-1", "tracking=none")
    with pytest.raises(ConfigValueError, match=r"runtime\.max_time_s=-1"):
        run_pipeline(cfg, print_summary=False)
    assert not list(tmp_path.rglob("exported.pt2"))  # export never ran
