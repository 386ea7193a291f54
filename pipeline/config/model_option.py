"""Check and settle the model option before any stage runs: required fields, file-form paths."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.errors import ModelOptionError
from stages.export.model_target import absolute_target
from stages.python_target import missing_target_name, split_file_target

_HOW = (
    "bring a model with `model=custom model._target_=pkg.module.factory` (or "
    "`model._target_=./my_model.py:factory`) and `'model.inputs=[{shape:[1,3,32,32]}]'`"
)


def settle_model_option(cfg: DictConfig, base_dir: Path) -> None:
    """Fail early when `_target_`/`inputs` are unset or the target names nothing; make a relative
    file-form target absolute against `base_dir` (the directory the user ran from), so
    fingerprints and resumes agree; the factory it names must exist in its file or module."""
    if OmegaConf.is_missing(cfg.model, "_target_"):
        missing = [
            f"model.{key}" for key in ("_target_", "inputs") if OmegaConf.is_missing(cfg.model, key)
        ]
        raise ModelOptionError(f"model=custom needs {' and '.join(missing)}: {_HOW}")
    typed = str(cfg.model._target_)
    with open_dict(cfg):
        cfg.model._target_ = absolute_target(typed, base_dir)
    split = split_file_target(str(cfg.model._target_))
    if split is not None and not Path(split[0]).is_file():  # a typo: refused before any stage
        raise ModelOptionError(
            f"model._target_={typed}: no such file {split[0]} (a relative path is "
            "taken from the directory you ran the command in); give FILE.py:FACTORY of an "
            "existing file"
        )
    undefined = missing_target_name(str(cfg.model._target_), base_dir)  # read, not run
    if undefined is not None:
        source, name, defined = undefined
        offer = (
            f"it defines {', '.join(defined)}"
            if defined
            else "it defines no public function or class"
        )
        raise ModelOptionError(
            f"model._target_={typed}: {source} defines no {name!r} ({offer}); "
            "name one of those after the ':' (or the last '.')"
        )
    if OmegaConf.is_missing(cfg.model, "inputs"):
        raise ModelOptionError(f"model._target_={typed} needs model.inputs: {_HOW}")
