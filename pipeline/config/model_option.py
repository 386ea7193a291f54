"""The model option's required fields, checked before any stage runs (its target is settled with
the other targets: pipeline.config.target_options)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ModelOptionError

_HOW = (
    "bring a model with `model=custom model._target_=pkg.module.factory` (or "
    "`model._target_=./my_model.py:factory`) and `'model.inputs=[{shape:[1,3,32,32]}]'`"
)


def check_model_option(cfg: DictConfig) -> None:
    """Fail early when `_target_` or `inputs` is unset, naming both when both are."""
    if OmegaConf.is_missing(cfg.model, "_target_"):
        missing = [
            f"model.{key}" for key in ("_target_", "inputs") if OmegaConf.is_missing(cfg.model, key)
        ]
        raise ModelOptionError(f"model=custom needs {' and '.join(missing)}: {_HOW}")
    if OmegaConf.is_missing(cfg.model, "inputs"):
        raise ModelOptionError(f"model._target_={cfg.model._target_} needs model.inputs: {_HOW}")
