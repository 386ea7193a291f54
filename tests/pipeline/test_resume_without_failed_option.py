"""After a bad `backend.fault.node`, the resume command offered leaves that option out: repeating
it would fail the same way."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from omegaconf import open_dict

from pipeline.errors import StageFailedError, without_option
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


def test_a_bad_fault_node_offers_a_resume_without_it(tmp_path: Path) -> None:
    overrides = ["model=mlp", "tracking=none", "backend.fault.node=no_such_node"]
    cfg = compose_config(tmp_path, overrides)
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    resume = shlex.join(["delegate-debugger", *overrides, f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(StageFailedError) as raised:
        run_pipeline(cfg, print_summary=False, resume_command=resume)
    assert raised.value.stage == "lower"
    assert "no_such_node" in str(raised.value)  # the message names the bad value ...
    assert "no_such_node" not in raised.value.resume_command  # ... the resume leaves it out
    assert "model=mlp" in raised.value.resume_command
