"""JSON text every stage file is written as: strict JSON, whatever floats the record holds.

Python's `json` writes a non-finite float as `NaN` / `Infinity`, which no strict parser (nor a
browser's `JSON.parse`) reads. Here such a float, at any depth, becomes the string `"nan"`,
`"inf"` or `"-inf"`: the value is kept (`float()` reads it back) and a reader that wants a number
sees that it is not one. The rule is the one summary.json has always followed
(`stages.analyze.compare.verdict.finite`), applied in one place for every file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stages.safe_io.atomic_write import write_text_atomic


def finite_or_name(value: Any) -> Any:
    """`value`, or for a non-finite float its name: 'nan', 'inf' or '-inf'."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float inside dicts, lists and tuples named (`finite_or_name`);
    tuples become lists, as `json` writes them."""
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return finite_or_name(value)


def json_text(
    data: Any,
    *,
    indent: int | None = None,
    sort_keys: bool = False,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """`json.dumps` of `data` made safe (`json_safe`); strict JSON (a value `default` turns
    into a non-finite float is refused, never written as `NaN`)."""
    safe = json_safe(data)
    if default is not None:
        inner = default
        default = lambda value: json_safe(inner(value))  # noqa: E731
    return json.dumps(safe, indent=indent, sort_keys=sort_keys, default=default, allow_nan=False)


def write_json_atomic(
    path: Path, data: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> None:
    """`path` written atomically with `json_text(data)`."""
    write_text_atomic(path, json_text(data, indent=indent, default=default))
