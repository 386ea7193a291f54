"""The plan an invocation settles once before any stage: checked options, stages in order, the
run dir, the cache, the resume command, the fault it asks for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict

from pipeline.errors import ConfigValueError, StageSelectionError
from pipeline.flow.run_plan import plan_run


def test_the_plan_holds_the_stages_in_order_and_where_they_run(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = tiny_cfg(
        "mlp", "stages=[analyze,export]", "backend.fault.node=relu", "cache=false", "cache_max_mb=0"
    )
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "here")
    plan = plan_run(cfg, tmp_path, None)
    assert plan.stages == ("export", "analyze")
    assert plan.run_dir == (tmp_path / "here").resolve()
    assert plan.cache.enabled is False and plan.cache.max_bytes is None
    assert plan.fault == "scale on relu"
    assert plan.resume.endswith(f"hydra.run.dir={plan.run_dir}")
    assert plan_run(cfg, tmp_path, "resume me").resume == "resume me"


def test_a_mistake_is_refused_before_anything_is_planned(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    with pytest.raises(StageSelectionError, match=r"stages=\[\] selects nothing"):
        plan_run(tiny_cfg("mlp", "stages=[]"), tmp_path, None)
    with pytest.raises(ConfigValueError, match=r"cache_max_mb=-1: give the stage cache's bound"):
        plan_run(tiny_cfg("mlp", "cache_max_mb=-1"), tmp_path, None)
