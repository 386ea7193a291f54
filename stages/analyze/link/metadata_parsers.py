"""Delegate metadata parsers: the backend's own by default, a user's by `_target_`."""

from __future__ import annotations

from typing import Any

from stages.analyze.link.linking import MetadataParser
from stages.dotted_import import callable_target, given_spec


class MetadataParserError(ValueError):
    """analyze.delegate_metadata_parser does not name an importable callable."""


def _raw(metadata: bytes) -> dict[str, Any]:
    return {"raw": metadata.hex()}


def _checked(parser: Any, target: str) -> MetadataParser:
    """Errors from a user's parser name the parser; a non-dict result is refused."""

    def parse(metadata: bytes) -> dict[str, Any]:
        try:
            result = parser(metadata)
        except Exception as exc:
            raise MetadataParserError(
                f"analyze.delegate_metadata_parser._target_={target!r} failed on "
                f"{len(metadata)} metadata bytes: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(result, dict):
            raise MetadataParserError(
                f"analyze.delegate_metadata_parser._target_={target!r} returned "
                f"{type(result).__name__}, not a dict"
            )
        return result

    return parse


def resolve_parser(
    spec: dict[str, Any] | None, backend: str, backend_target: str | None = None
) -> MetadataParser:
    """`spec._target_` (a callable bytes -> dict), else the backend's parse_delegate_metadata."""
    spec = given_spec(spec)
    if spec is not None:
        parser = callable_target(
            spec,
            "analyze.delegate_metadata_parser",
            MetadataParserError,
            "package.module.function`, a callable taking the metadata bytes and returning a dict",
        )
        target = str(spec["_target_"])
        return _checked(parser, target)
    if backend:
        from stages.backends.backend_api import BackendError, backend_class

        try:
            return backend_class(backend, backend_target).parse_delegate_metadata
        except BackendError:
            return _raw
    return _raw
