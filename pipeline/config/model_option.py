"""Check and settle the model option before any stage runs: required fields, file-form paths."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.errors import ModelOptionError
from stages.export.model_target import absolute_target

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
