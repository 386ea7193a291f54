"""`model=custom` is labelled after its factory: `model._target_=./my_model.py:make_dsp_net`
names the run dir, the sweep job dirs and the MLflow run `make_dsp_net`, not `custom`."""

from __future__ import annotations

import re
from typing import Any

from omegaconf import OmegaConf

FACTORY_NAME_RESOLVER = "factory_name"
FALLBACK = "custom"  # while the target is not given yet (the config check then says so)
# Keyword arguments that pick what one factory builds (`stages.export.zoo.hf.make arch=llama`):
# their value joins the factory's name, so two architectures of one factory are told apart.
SELECTOR_KWARGS = ("arch", "architecture", "variant")


def factory_name(target: Any) -> str:
    """The factory's own name from `pkg.mod.fn` or `path/file.py:fn`, safe in a directory name."""
    text = str(target or "").strip()
    tail = text.rsplit(":", 1)[-1] if ":" in text else text.rsplit(".", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", tail).strip("._-")
    return name or FALLBACK


def _resolve(*, _parent_: Any) -> str:
    """The resolver never raises: Hydra would print a traceback instead of a message."""
    if OmegaConf.is_missing(_parent_, "_target_"):
        return FALLBACK
    name = factory_name(_parent_.get("_target_"))
    kwargs = _parent_.get("kwargs") or {}
    for key in SELECTOR_KWARGS:
        value = kwargs.get(key) if hasattr(kwargs, "get") else None
        if isinstance(value, str) and value:
            return f"{name}_{factory_name(value)}"
    return name


def register_factory_name_resolver() -> None:
    """Make `${factory_name:}` resolvable (conf/model/custom.yaml's `name`)."""
    OmegaConf.register_new_resolver(FACTORY_NAME_RESOLVER, _resolve, use_cache=False, replace=True)
