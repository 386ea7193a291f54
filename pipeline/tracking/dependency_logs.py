"""Silence dependency log lines a user can do nothing about; our own warnings stay."""

from __future__ import annotations

import logging

# Loggers whose INFO lines describe a dependency's internals (MLflow creating its sqlite schema).
_CHATTY = ("mlflow.store.db.utils", "alembic", "alembic.runtime.migration")


def quiet_dependency_logs() -> None:
    """Raise the chatty dependency loggers to WARNING (their warnings and errors still show)."""
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.WARNING)
