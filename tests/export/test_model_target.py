"""Bringing a model: `model=custom`, the file form, kwargs that must not leak, plain factories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf
from torch import nn

from stages.export.model_factory import ModelConfigError, build_model
from stages.export.model_target import absolute_target, target_source_file

MODEL_FILE = """
import torch
from torch import nn


class Two(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.fc = nn.Linear(32, width)

    def forward(self, image, vec):
        return image.mean(dim=(2, 3)) + self.fc(vec)[:, :8]


def make():
    return Two()


def make_wide(width=8, **extra):
    return Two(width)
"""

INPUTS = "model.inputs=[{shape:[1,8,16,16]},{shape:[1,32]}]"


def _model_file(directory: Path) -> Path:
    path = directory / "my_model.py"
    path.write_text(MODEL_FILE)
    return path


def test_file_form_with_a_plain_factory_builds_from_the_given_directory(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    _model_file(tmp_path)
    cfg = OmegaConf.to_object(
        make_cfg("model=custom", "model._target_=./my_model.py:make", INPUTS).model
    )
    model = build_model(cfg, base_dir=tmp_path)
    assert isinstance(model, nn.Module) and type(model).__name__ == "Two"
    assert not model.training


def test_custom_passes_kwargs_and_checks_their_names(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    path = _model_file(tmp_path)
    target = f"model._target_={path}:make_wide"
    cfg = OmegaConf.to_object(
        make_cfg("model=custom", target, "model.kwargs.width=16", INPUTS).model
    )
    assert build_model(cfg).fc.out_features == 16
    plain = f"model._target_={path}:make"
    cfg = OmegaConf.to_object(
        make_cfg("model=custom", plain, "model.kwargs.width=16", INPUTS).model
    )
    with pytest.raises(
        ModelConfigError, match=r"model\.kwargs\.width is not a parameter.*valid: none"
    ):
        build_model(cfg)


def test_a_zoo_options_kwargs_never_leak_into_another_factory(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    path = _model_file(tmp_path)
    cfg = OmegaConf.to_object(make_cfg("model=vit", f"model._target_={path}:make_wide").model)
    with pytest.raises(ModelConfigError) as caught:
        build_model(cfg)
    message = str(caught.value)
    assert "model=vit sets model.kwargs (depth, dim," in message
    assert f"`model=custom model._target_={path}:make_wide`" in message
    assert "model.kwargs_for=" in message


def test_file_form_errors_name_the_file_and_what_it_defines(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    _model_file(tmp_path)
    missing = OmegaConf.to_object(
        make_cfg("model=custom", "model._target_=./absent.py:make", INPUTS).model
    )
    with pytest.raises(ModelConfigError, match=r"no such file .*absent\.py.*directory you ran"):
        build_model(missing, base_dir=tmp_path)
    wrong = OmegaConf.to_object(
        make_cfg("model=custom", "model._target_=./my_model.py:build", INPUTS).model
    )
    with pytest.raises(ModelConfigError, match=r"defines no 'build' .*make, make_wide"):
        build_model(wrong, base_dir=tmp_path)
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    broken = OmegaConf.to_object(
        make_cfg("model=custom", "model._target_=./broken.py:make", INPUTS).model
    )
    with pytest.raises(ModelConfigError, match=r"running .*broken\.py failed: ModuleNotFoundError"):
        build_model(broken, base_dir=tmp_path)


def test_targets_resolve_to_their_source_files(tmp_path: Path) -> None:
    path = _model_file(tmp_path)
    assert absolute_target("./my_model.py:make", tmp_path) == f"{path.resolve()}:make"
    assert absolute_target("pkg.mod.fn", tmp_path) == "pkg.mod.fn"
    assert target_source_file("./my_model.py:make", tmp_path) == path.resolve()
    vit = target_source_file("stages.export.zoo.vit.build_vit", tmp_path)
    assert vit is not None and vit.name == "vit.py"
    assert target_source_file("nowhere.at.all", tmp_path) is None


def test_every_zoo_option_records_the_factory_its_kwargs_are_for() -> None:
    conf = Path(__file__).resolve().parents[2] / "conf" / "model"
    for option in sorted(conf.glob("*.yaml")):
        data = OmegaConf.load(option)
        if option.stem == "custom":
            assert OmegaConf.is_missing(data, "_target_") and data.kwargs == {}
        else:
            assert data.kwargs_for == data._target_, option.name
