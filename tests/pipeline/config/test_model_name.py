"""A custom model is labelled after its factory (run dir, sweep job dirs, MLflow), not `custom`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.model_name import factory_name
from tests.helpers.configs import compose_config


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("./my_model.py:make_dsp_net", "make_dsp_net"),
        ("/abs/dir/net.py:build", "build"),
        ("pkg.models.make_resnet", "make_resnet"),
        ("pkg.models:Net", "Net"),
        ("./m.py:ma ke", "ma_ke"),
        ("", "custom"),
    ],
)
def test_factory_name(target: str, name: str) -> None:
    assert factory_name(target) == name


def test_a_custom_models_name_and_run_dir_follow_its_factory(tmp_path: Path) -> None:
    cfg = compose_config(
        tmp_path,
        ["model=custom", "model._target_=./my_model.py:make_dsp_net", "model.inputs=[{shape:[1]}]"],
    )
    assert cfg.model.name == "make_dsp_net"
    unset = compose_config(tmp_path, ["model=custom"])
    assert unset.model.name == "custom"  # no factory yet: the config check says what is missing


def test_the_architecture_a_factory_builds_joins_its_name(tmp_path: Path) -> None:
    cfg = compose_config(
        tmp_path,
        ["model=custom", "model._target_=stages.export.zoo.hf.make", "+model.kwargs.arch=llama"],
    )
    assert cfg.model.name == "make_llama"
