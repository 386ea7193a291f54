from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from stages.export.config import InputsConfig, InputsSource
from stages.export.inputs.errors import InputsConfigError
from stages.export.inputs.random_source import generate_inputs
from stages.export.inputs.selection import select_inputs
from stages.export.model_factory import ModelConfigError, build_model


def test_unknown_kwarg_names_the_option_and_lists_valid_ones(
    tiny_cfg: Callable[..., DictConfig],
) -> None:
    cfg = OmegaConf.to_object(tiny_cfg("vit", "+model.kwargs.deppth=3").model)
    with pytest.raises(ModelConfigError, match=r"model\.kwargs\.deppth .*valid: .*depth"):
        build_model(cfg)


def test_unimportable_target_says_so(tiny_cfg: Callable[..., DictConfig]) -> None:
    cfg = OmegaConf.to_object(tiny_cfg("mlp", "model._target_=nowhere.build").model)
    with pytest.raises(ModelConfigError, match=r"model\._target_='nowhere.build': cannot import"):
        build_model(cfg)


def test_seeded_weights_and_checkpoint(tiny_cfg: Callable[..., DictConfig], tmp_path: Path) -> None:
    cfg = OmegaConf.to_object(tiny_cfg("mlp").model)
    a, b = build_model(cfg), build_model(cfg)
    assert all(
        torch.equal(x, y)
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )
    state = {k: torch.zeros_like(v) for k, v in a.state_dict().items()}
    torch.save(state, tmp_path / "ckpt.pt")
    cfg.checkpoint = str(tmp_path / "ckpt.pt")
    assert all(float(v.abs().sum()) == 0.0 for v in build_model(cfg).state_dict().values())
    torch.save({"inp.weight": torch.zeros(1)}, tmp_path / "bad.pt")
    cfg.checkpoint = str(tmp_path / "bad.pt")
    with pytest.raises(ModelConfigError, match="does not fit model 'mlp'"):
        build_model(cfg)


def test_inputs_are_seeded_and_files_are_checked(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = tiny_cfg("llm", "inputs.count=3")
    specs, inputs_cfg = OmegaConf.to_object(cfg.model).inputs, OmegaConf.to_object(cfg.inputs)
    first = generate_inputs(specs, inputs_cfg.count, inputs_cfg.seed)
    again = generate_inputs(specs, inputs_cfg.count, inputs_cfg.seed)
    assert len(first) == 3 and first[0][0].dtype == torch.int64 and int(first[0][0].max()) < 64
    assert all(torch.equal(x[0], y[0]) for x, y in zip(first, again, strict=True))
    torch.save([(torch.zeros(1, 9, dtype=torch.int64),)], tmp_path / "wrong.pt")
    files = InputsConfig(InputsSource.files, path=str(tmp_path / "wrong.pt"))
    with pytest.raises(InputsConfigError, match=r"model\.inputs\[0\]\.shape is \[1, 8\]"):
        select_inputs(specs, files, tmp_path)
