"""Check and settle the model option before any stage runs: required fields, file-form paths."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.errors import ModelOptionError
from stages.export.model_target import absolute_target
from stages.python_target import split_file_target

_HOW = (
    "bring a model with `model=custom model._target_=pkg.module.factory` (or "
    "`model._target_=./my_model.py:factory`) and `'model.inputs=[{shape:[1,3,32,32]}]'`"
)


def settle_model_option(cfg: DictConfig, base_dir: Path) -> None:
    """Fail early when `_target_`/`inputs` are unset; make a relative file-form target absolute
    against `base_dir` (the directory the user ran from), so fingerprints and resumes agree."""
    missing = [key for key in ("_target_", "inputs") if OmegaConf.is_missing(cfg.model, key)]
    if missing:
        names = " and ".join(f"model.{key}" for key in missing)
        raise ModelOptionError(f"model={cfg.model.name} needs {names}: {_HOW}")
    with open_dict(cfg):
        cfg.model._target_ = absolute_target(str(cfg.model._target_), base_dir)
    split = split_file_target(str(cfg.model._target_))
    if split is not None and not Path(split[0]).is_file():  # a typo: refused before any stage
        raise ModelOptionError(
            f"model._target_={cfg.model._target_}: no such file {split[0]} (a relative path is "
            "taken from the directory you ran the command in); give FILE.py:FACTORY of an "
            "existing file"
        )
