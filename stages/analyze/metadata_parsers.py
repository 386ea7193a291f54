"""Delegate metadata parsers: the backend's own by default, a user's by `_target_`."""

from __future__ import annotations

import importlib
from typing import Any

from stages.analyze.linking import MetadataParser


class MetadataParserError(ValueError):
    """analyze.delegate_metadata_parser does not name an importable callable."""


def _raw(metadata: bytes) -> dict[str, Any]:
    return {"raw": metadata.hex()}


def resolve_parser(
    spec: dict[str, Any] | None, backend: str, backend_target: str | None = None
) -> MetadataParser:
    """`spec._target_` (a callable bytes -> dict), else the backend's parse_delegate_metadata."""
    if spec:
        target = spec.get("_target_")
        if not isinstance(target, str) or "." not in target:
            raise MetadataParserError(
                "analyze.delegate_metadata_parser needs `_target_: package.module.function`, a "
                "callable taking the metadata bytes and returning a dict"
            )
        module, _, attr = target.rpartition(".")
        try:
            parser = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise MetadataParserError(
                f"analyze.delegate_metadata_parser._target_={target!r} cannot be imported ({exc})"
            ) from exc
        if not callable(parser):
            raise MetadataParserError(
                f"analyze.delegate_metadata_parser._target_={target!r} is not callable"
            )
        return parser
    if backend:
        from stages.backends.backend_api import BackendError, backend_class

        try:
            return backend_class(backend, backend_target).parse_delegate_metadata
        except BackendError:
            return _raw
    return _raw
