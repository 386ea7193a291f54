"""Resolve `model._target_`: a dotted path (`pkg.mod.fn`) or a file form (`./my_model.py:make`).

The two forms are `stages.python_target`'s (the backend option accepts the same); this module
keeps the model option's names and its error type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stages.python_target import (
    FILE_TARGET_SEPARATOR,
    absolute_target,
    split_file_target,
    target_source_file,
)
from stages.python_target import import_target as _import_target

__all__ = [
    "FILE_TARGET_SEPARATOR",
    "ModelConfigError",
    "absolute_target",
    "import_target",
    "split_file_target",
    "target_source_file",
]


class ModelConfigError(ValueError):
    """The model config names something that cannot be built; the message names the option."""


def import_target(target: str, option: str, base_dir: Path) -> Any:
    """The object `target` names; a ModelConfigError naming `option` if it cannot be found."""
    return _import_target(target, option, base_dir, ModelConfigError)
