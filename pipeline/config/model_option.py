"""The model option's target given, checked before any stage runs (the target is then settled
with the other targets, and its `model.inputs` checked after it: pipeline.config.target_options)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ModelOptionError

MODEL_HOW = (
    "bring a model with `model=custom model._target_=pkg.module.factory` (or "
    "`model._target_=./my_model.py:factory`) and `'model.inputs=[{shape:[1,3,32,32]}]'`"
)


def check_model_option(cfg: DictConfig) -> None:
    """Fail early when `_target_` is unset (naming `inputs` too when it is unset as well)."""
    if OmegaConf.is_missing(cfg.model, "_target_"):
        missing = [
            f"model.{key}" for key in ("_target_", "inputs") if OmegaConf.is_missing(cfg.model, key)
        ]
        raise ModelOptionError(f"model=custom needs {' and '.join(missing)}: {MODEL_HOW}")
