"""How many timed executions a run makes: `runtime.iterations` at most, fewer for a slow model.

The rule is pytest-benchmark's (`min_rounds`, `max_time`): at least `runtime.min_iterations`,
then stop once the timed executions have taken `runtime.max_time_s` in all (null: always
`runtime.iterations`). A model whose every execution takes long is measured as precisely with
fewer of them; a fast one runs them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class IterationBudgetError(ValueError):
    """`runtime.iterations`, `runtime.min_iterations` or `runtime.max_time_s` out of range."""


@dataclass
class IterationBudget:
    """Counts the timed executions and their seconds; `more()` says whether to run another."""

    iterations: int
    min_iterations: int
    max_time_s: float | None
    done: int = 0
    spent_s: float = 0.0

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise IterationBudgetError(f"runtime.iterations={self.iterations}: give 1 or more")
        if self.min_iterations < 1:
            raise IterationBudgetError(
                f"runtime.min_iterations={self.min_iterations}: give 1 or more"
            )
        if self.max_time_s is not None and not (
            math.isfinite(self.max_time_s) and self.max_time_s > 0
        ):
            raise IterationBudgetError(
                f"runtime.max_time_s={self.max_time_s}: give seconds > 0, or null to always "
                "run runtime.iterations"
            )

    def more(self) -> bool:
        """True while another timed execution is due."""
        if self.done >= self.iterations:
            return False
        if self.done < self.min_iterations or self.max_time_s is None:
            return True
        return self.spent_s < self.max_time_s

    def record(self, seconds: float) -> None:
        """One timed execution took `seconds`."""
        self.done += 1
        self.spent_s += seconds

    @property
    def stopped_early(self) -> bool:
        """Fewer than `iterations` ran because the time budget was spent."""
        return self.done < self.iterations
