"""How many jobs the default launcher runs side by side, and what each worker preloads."""

from __future__ import annotations

import pytest
from omegaconf import DictConfig, OmegaConf

from pipeline.stage_registry import STAGES
from pipeline.sweeps import parallel_launch


def sweep_config(n_jobs: int, tracking: bool = True) -> DictConfig:
    config = OmegaConf.create(
        {"hydra": {"launcher": {"n_jobs": n_jobs}}, "tracking": {"enabled": tracking}}
    )
    OmegaConf.set_readonly(config.hydra, True)  # as Hydra hands it over
    return config


@pytest.mark.parametrize(
    ("n_jobs", "busy", "resolved"),
    [
        (-1, 0, 2),  # an idle 2-core machine: both cores
        (-1, 1, 1),  # another session runs: one by one (it would only split our share)
        (-1, 5, 1),
        (2, 5, 2),  # asked for explicitly: kept whatever the load
        (1, 0, 1),
    ],
)
def test_automatic_n_jobs_takes_the_cores_free_now(
    monkeypatch: pytest.MonkeyPatch, n_jobs: int, busy: int, resolved: int
) -> None:
    monkeypatch.setattr(parallel_launch, "usable_cores", lambda: 2)
    monkeypatch.setattr("pipeline.cpu_threads.usable_cores", lambda: 2)
    monkeypatch.setattr(parallel_launch, "runnable_elsewhere", lambda: busy)
    config = sweep_config(n_jobs)
    assert parallel_launch.resolve_parallel_jobs(config) == resolved
    assert config.hydra.launcher.n_jobs == resolved  # the jobs read the same number
    assert parallel_launch.resolve_parallel_jobs(config) == resolved  # and it stays fixed


def test_workers_preload_every_stage_and_tracking_only_when_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("pipeline.cpu_threads.usable_cores", lambda: 2)
    shape = parallel_launch.pool_shape(sweep_config(2), jobs=8)
    assert (shape.workers, shape.threads) == (2, 1)
    assert {spec.entry_module for spec in STAGES.values()} <= set(shape.modules)
    assert any(m.startswith("mlflow") for m in shape.modules)
    untracked = parallel_launch.pool_shape(sweep_config(2, tracking=False), jobs=1)
    assert untracked.workers == 1  # never more workers than jobs
    assert not any(m.startswith("mlflow") for m in untracked.modules)
