"""`search=...` selects this sweeper: each trial is a sweep job, chosen from the earlier ones.

A thin plugin shim (Hydra imports every module of `hydra_plugins` at start-up, so this one
imports nothing heavy): the work is `pipeline.searches.driver.run_search`.
"""

from __future__ import annotations

from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class SearchSweeper(Sweeper):
    """Runs a search's trials through the configured launcher, a batch at a time."""

    def __init__(self, max_batch_size: int | None = None, params: Any = None) -> None:
        # BasicSweeper's fields (hydra.sweeper keeps them): a search makes its own jobs.
        self.params = params
        self.config: DictConfig | None = None
        self.launcher: Any = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from pipeline.searches.driver import run_search

        if self.config is None or self.launcher is None:
            raise RuntimeError("SearchSweeper.sweep() before setup()")
        return run_search(self.config, self.launcher, list(arguments), self.validate_batch_is_legal)
