"""Resolve a `_target_`-style dotted path: a module attribute or a nested one (Class.method)."""

from __future__ import annotations

import importlib
from typing import Any


def import_dotted(target: str) -> Any:
    """The object at `package.module.Name[.attr...]`; ImportError/AttributeError if absent."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"no importable module in {target!r}")
