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


def callable_target(
    spec: dict[str, Any], option: str, error: type[Exception], expected: str
) -> Any:
    """The callable named by `spec['_target_']`; `error` naming `option` if it is not one.

    `expected` says what the target should be, e.g. "package.module.Class with a compare()".
    """
    target = spec.get("_target_")
    if not isinstance(target, str) or "." not in target:
        raise error(f"{option} needs `_target_: {expected}`")
    try:
        found = import_dotted(target)
    except (ImportError, AttributeError) as exc:
        raise error(f"{option}._target_={target!r} cannot be imported ({exc})") from exc
    if not callable(found):
        raise error(f"{option}._target_={target!r} is not callable")
    return found
