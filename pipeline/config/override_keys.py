"""Keys of command-line overrides checked against the schemas before Hydra composes.

Hydra refuses `backend.precison=int8` with its own words and no hint, and accepts
`+backend.precison=int8` as a new key that nothing reads: a silent wrong run. Every
`[+|++|~]KEY=VALUE` whose KEY lies under a schema-backed node must name a field of that
schema; below an open node (a `dict` field such as `model.kwargs` or `backend.compile_specs`)
any key is the user's own.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Iterator, Sequence
from typing import Any

from pipeline.config.front_door import CommandLineError

# Keys Hydra owns, and top-level keys the pipeline sets for itself (never typed by users).
_NOT_SCHEMA_KEYS = ("hydra",)


def _field_types(schema: type) -> dict[str, Any]:
    """{field name: its type} of a dataclass schema, string annotations resolved."""
    hints = typing.get_type_hints(schema)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(schema)}


def _schema_of(annotation: Any) -> type | None:
    """The dataclass an annotation names (`X`, `X | None`), or None for an open or leaf value."""
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation
    for arg in typing.get_args(annotation):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None


def _is_open(annotation: Any) -> bool:
    """A node whose keys are the user's own: a dict, or an untyped value."""
    origin = typing.get_origin(annotation) or annotation
    return annotation is Any or origin is dict


def _known_keys(schema: type, prefix: str = "") -> Iterator[str]:
    """Every dotted key a schema declares (open nodes as themselves), for suggestions."""
    for name, annotation in _field_types(schema).items():
        key = f"{prefix}{name}"
        yield key
        nested = _schema_of(annotation)
        if nested is not None and not _is_open(annotation):
            yield from _known_keys(nested, f"{key}.")


def unknown_key(key: str, schema: type) -> str | None:
    """The first part of dotted `key` that `schema` does not declare (its dotted prefix), or None
    when the key exists or runs into an open node."""
    node: type | None = schema
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if node is None:
            return None  # a leaf with more parts: Hydra says what it makes of that
        fields = _field_types(node)
        if part not in fields:
            return ".".join(parts[: depth + 1])
        if _is_open(fields[part]):
            return None
        node = _schema_of(fields[part])
    return None


def _override_key(arg: str) -> str | None:
    """`KEY` of an override `[+|++|~]KEY[=VALUE]`, or None for a flag or a group choice."""
    if arg.startswith("-") or ("=" not in arg and not arg.startswith("~")):
        return None  # a flag, or a flag's value (`--cfg job`)
    key = arg.split("=", 1)[0].lstrip("+~")
    if "@" in key or "/" in key or not key:
        return None  # a package or a nested group's choice (`hydra/launcher=basic`)
    return key


def check_override_keys(
    args: Sequence[str], schema: type, groups: Sequence[str], *, more_configs: bool = False
) -> None:
    """Raise CommandLineError for an override whose key no schema declares, naming the closest
    valid keys. `groups` are the config groups (a bare `group=option` picks an option); with
    `more_configs` (another config dir) only keys under the schema's own fields are judged."""
    top = set(_field_types(schema))
    for arg in args:
        key = _override_key(arg)
        if key is None or key.split(".")[0] in _NOT_SCHEMA_KEYS:
            continue
        if "." not in key and key in groups:
            continue  # `backend=qnn`, `+search=precision`: a group choice (front_door checks it)
        if more_configs and key.split(".")[0] not in top:
            continue  # a group or key of the user's own config dir: Hydra judges it
        wrong = unknown_key(key, schema)
        if wrong is None:
            continue
        raise CommandLineError(_unknown_key_message(arg, key, wrong, list(_known_keys(schema))))


def _unknown_key_message(arg: str, key: str, wrong: str, known: list[str]) -> str:
    """What is wrong, the closest keys, and the options beside the wrong one."""
    parent = wrong.rpartition(".")[0]
    siblings = [k for k in known if k.rpartition(".")[0] == parent and k != "defaults"]
    close = difflib.get_close_matches(wrong, siblings, n=3, cutoff=0.75) or (
        difflib.get_close_matches(key, known, n=3, cutoff=0.75)
    )
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    names = ", ".join(s.rpartition(".")[2] for s in siblings)
    where = f"{parent} has" if parent else "the top level has"
    return (
        f"{arg}: there is no option {wrong}{hint} ({where} {names}; "
        "`python -m pipeline --cfg job` prints every option with its value)"
    )
