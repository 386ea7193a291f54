"""The inputs option checked before any stage: missing or wrong paths and targets, counts out of
range and user data with a generation are refused naming the option."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig

from pipeline.config.inputs_checks import check_inputs_options
from pipeline.config.target_options import settle_targets
from pipeline.errors import ConfigValueError
from tests.helpers.configs import compose_config

EXPORT = ["export", "lower", "run", "analyze"]


def _check(cfg: DictConfig, stages: list[str], base_dir: Path) -> None:
    """The inputs option's checks as the one pass runs them: targets settled, then the group's."""
    settle_targets(cfg, stages, base_dir)
    check_inputs_options(cfg, stages)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["inputs=files"], "inputs=files needs inputs.path=FILE, DIR or 'GLOB'"),
        (["inputs=files", "inputs.path=nowhere"], "inputs.path=nowhere: no such file"),
        (["inputs.path=missing.pt"], "inputs.path=missing.pt: no such file"),
        (["inputs=files", "inputs.path=empty"], "directory .*empty has no .pt/.pth/.npy/.npz"),
        (["inputs=loader"], "inputs=loader needs inputs._target_=pkg.module.fn"),
        (["inputs=loader", "inputs._target_=./gone.py:fn"], "no such file .*gone.py"),
        (["inputs=loader", "inputs._target_=./data.py:lodaer"], "defines no 'lodaer' .*loader"),
        (["inputs.calibration=-2"], r"inputs.calibration=-2: give 0 or more"),
        (["inputs=files", "inputs.path=d.npy", "inputs.evaluation=0"], "inputs.evaluation=0"),
        (
            ["model=llm", "inputs=files", "inputs.path=d.npy", "runtime.generate.prompt_tokens=4"],
            "inputs=files with runtime.generate",
        ),
    ],
)
def test_an_inputs_mistake_is_refused_naming_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "data.py").write_text("def loader():\n    return []\n")
    np.save(tmp_path / "d.npy", np.zeros((1, 4, 32), np.float32))
    monkeypatch.chdir(tmp_path)
    cfg = compose_config(tmp_path, ["model=mlp", *overrides])
    with pytest.raises(ConfigValueError, match=message):
        _check(cfg, EXPORT, tmp_path)


def test_a_loader_target_is_made_absolute_and_analysis_alone_checks_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "data.py").write_text("def loader():\n    return []\n")
    cfg = compose_config(
        tmp_path, ["model=mlp", "inputs=loader", "inputs._target_=./data.py:loader"]
    )
    _check(cfg, EXPORT, tmp_path)
    assert cfg.inputs._target_ == f"{(tmp_path / 'data.py').resolve()}:loader"
    missing = compose_config(tmp_path, ["inputs=files"])
    _check(missing, ["analyze"], tmp_path)  # the export stage does not run
