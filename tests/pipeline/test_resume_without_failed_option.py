"""After a stage fails on an option, the resume command offered leaves that option out: repeating
it would fail the same way. (A bad `backend.fault.node` is now refused before any stage.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import open_dict

from pipeline.errors import ConfigValueError, StageFailedError, without_option
from pipeline.runner import run_pipeline
from stages.lower.stage import LoweringError
from tests.helpers.configs import compose_config


def test_without_option_drops_every_form_of_it() -> None:
    command = (
        "delegate-debugger model=mlp backend.fault.node=nope +backend.fault.node=x hydra.run.dir=r"
    )
    assert without_option(command, "backend.fault.node") == (
        "delegate-debugger model=mlp hydra.run.dir=r"
    )
    assert without_option("a 'b=c d'", "b") == "a"  # quoted words are one override


def test_a_failed_option_is_left_out_of_the_resume_command() -> None:
    cause = LoweringError("backend.fault.node='nope' is not a node", "backend.fault.node")
    error = StageFailedError(
        "lower", cause, "run model=mlp backend.fault.node=nope hydra.run.dir=r"
    )
    assert error.resume_command == "run model=mlp hydra.run.dir=r"
    assert "backend.fault.node=nope" not in str(error).split("\n", 1)[1]
    plain = StageFailedError("lower", ValueError("x"), "run model=mlp hydra.run.dir=r")
    assert plain.resume_command == "run model=mlp hydra.run.dir=r"


def test_a_bad_fault_node_is_refused_before_any_stage(tmp_path: Path) -> None:
    """Since the op names are checked before any stage (issue 36.2), no stage fails on it: the
    refusal names the option and what it could have been, and no run dir is left to resume."""
    overrides = ["model=mlp", "tracking=none", "backend.fault.node=no_such_node"]
    cfg = compose_config(tmp_path, overrides)
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    with pytest.raises(
        ConfigValueError, match=r"backend\.fault\.node: 'no_such_node' is not an op"
    ):
        run_pipeline(cfg, print_summary=False)
    assert not (tmp_path / "run").exists()
