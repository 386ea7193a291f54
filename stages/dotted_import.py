"""The callable a `_target_` names (`pkgutil.resolve_name`: `pkg.module.Name[.attr]` or `pkg.module:Name`)."""

from __future__ import annotations

import pkgutil
from typing import Any


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
        found = pkgutil.resolve_name(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise error(f"{option}._target_={target!r} cannot be imported ({exc})") from exc
    if not callable(found):
        raise error(f"{option}._target_={target!r} is not callable")
    return found


def given_spec(spec: Any) -> dict[str, Any] | None:
    """A `{_target_: ..., kwargs...}` option as given, or None while it is unset (null, or its
    default `{_target_: null}`, which lets `option._target_=...` be typed on the command line)."""
    if not spec:
        return None
    found = dict(spec)
    return None if found == {"_target_": None} else found
