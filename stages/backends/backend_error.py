"""The error every backend problem raises (its own module so the backend API's parts share it)."""

from __future__ import annotations


class BackendError(Exception):
    """A backend that cannot be found, built, or run with the given bytes/specs."""
