"""Every `_target_` settled in one place: relative file forms made absolute against where the user
ran, a missing file or an undefined name refused naming the option, with the option's own error."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.target_options import settle_targets
from pipeline.errors import ConfigValueError, ModelOptionError
from tests.helpers.configs import compose_config

EXPORT = ["export", "lower", "run", "analyze"]
SOURCE = "import torch\n\n\ndef make():\n    return torch.nn.Linear(4, 2)\n\n\ndef loader():\n    return []\n"


def test_each_target_is_made_absolute_against_the_directory_the_user_ran_from(
    tmp_path: Path,
) -> None:
    (tmp_path / "mine.py").write_text(SOURCE)
    cfg = compose_config(
        tmp_path,
        [
            "model=custom",
            "model._target_=./mine.py:make",
            "model.inputs=[{shape:[1,4]}]",
            "inputs=loader",
            "inputs._target_=./mine.py:loader",
        ],
    )
    settle_targets(cfg, EXPORT, tmp_path)
    source = (tmp_path / "mine.py").resolve()
    assert cfg.model._target_ == f"{source}:make"
    assert cfg.inputs._target_ == f"{source}:loader"
    assert cfg.backend._target_ == "stages.backends.xnnpack.XnnpackBackend"  # dotted: unchanged


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        (
            ["model=custom", "model._target_=./gone.py:make"],
            ModelOptionError,
            r"model._target_=./gone.py:make: no such file .*gone.py .*give FILE.py:FACTORY",
        ),
        (
            ["model=custom", "model._target_=./mine.py:mkae"],
            ModelOptionError,
            r"defines no 'mkae' \(it defines loader, make\); name one of those",
        ),
        (
            ["inputs=loader", "inputs._target_=./mine.py:lodaer"],
            ConfigValueError,
            r"inputs._target_=./mine.py:lodaer: .*mine.py defines no 'lodaer' \(it defines loader, make\)$",
        ),
        (
            ["model=custom", "model._target_=./mine.py:make"],
            ModelOptionError,
            r"model._target_=./mine.py:make needs model.inputs: bring a model",
        ),
        (  # a dotted path through a module that does not exist: named at the package it left
            ["inputs=loader", "inputs._target_=stages.export.inputs.digits.digits_samples"],
            ConfigValueError,
            r"inputs/__init__.py defines no 'digits' \(it defines .*loader_source",
        ),
    ],
)
def test_a_target_that_names_nothing_is_refused_with_its_options_error(
    tmp_path: Path, overrides: list[str], error: type[Exception], message: str
) -> None:
    (tmp_path / "mine.py").write_text(SOURCE)
    cfg = compose_config(tmp_path, overrides)
    with pytest.raises(error, match=message):
        settle_targets(cfg, EXPORT, tmp_path)


def test_without_the_export_stage_only_the_backend_is_settled(tmp_path: Path) -> None:
    cfg = compose_config(tmp_path, ["model=custom", "model._target_=./gone.py:make"])
    settle_targets(cfg, ["analyze"], tmp_path)  # the model is not built: nothing to refuse
    assert cfg.model._target_ == "./gone.py:make"
