"""A user's backend file is an input of the stages that run its code (lower and run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from pipeline.stage_registry import STAGES
from tests.helpers.cli_runner import REPO

EXAMPLE = REPO / "docs" / "examples" / "npu_backend.py"


def test_a_users_backend_file_fingerprints_lower_and_run(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    custom = tiny_cfg("mlp", f"backend._target_={EXAMPLE}:NpuBackend")
    builtin = tiny_cfg("mlp")
    for stage in ("lower", "run"):
        assert STAGES[stage].optional_inputs(custom, tmp_path) == [EXAMPLE]
        assert STAGES[stage].optional_inputs(builtin, tmp_path) == []  # in the code version
