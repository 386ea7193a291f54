"""Silence dependency log lines a user can do nothing about; our own warnings stay.

Third-party noise (ExecuTorch's and torch's FutureWarnings, torch's pytree notices, torchao's
warnings, the ExecuTorch runtime's `cpuinfo_utils` lines) says nothing about the user's model:
it is kept in the run's log file and left out of the terminal, as are our own per-item details
(`stages.log_details`) and MLflow's artifact progress bars. Errors always reach the terminal.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import sysconfig

from stages.log_details import is_log_file_only

# Loggers whose INFO lines describe a dependency's internals (MLflow creating its sqlite schema).
_CHATTY = ("mlflow.store.db.utils", "alembic", "alembic.runtime.migration")
# Loggers of dependencies whose warnings go to the log file only (prefixes: "torch" is torch.*).
FILE_ONLY_LOGGERS = ("torch", "torchao", "executorch", "transformers")
_WARNING_SOURCE = re.compile(r"^(?P<path>[^\n]*?\.py):\d+: \w+Warning:")
_THIRD_PARTY_ROOTS = tuple(
    {sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")}
    | {sys.prefix, sys.base_prefix}
)


# MLflow draws a tqdm bar ("Downloading artifacts", "Uploading artifacts") on stderr for every
# artifact transfer: a sweep's comparison and a search print one per trial. Off unless set.
PROGRESS_BAR_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def quiet_dependency_logs() -> None:
    """Raise the chatty dependency loggers to WARNING (their warnings and errors still show);
    MLflow's artifact progress bars off (MLflow reads the variable at each transfer; a value
    the user set is kept)."""
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault(PROGRESS_BAR_ENV, "false")


def is_dependency_noise(record: logging.LogRecord) -> bool:
    """A warning or notice from a dependency, not an error and not about the user's code."""
    if record.levelno >= logging.ERROR:
        return False
    name = record.name
    if any(name == prefix or name.startswith(prefix + ".") for prefix in FILE_ONLY_LOGGERS):
        return True
    if name == "py.warnings":  # a Python warning, routed here by logging.captureWarnings
        found = _WARNING_SOURCE.match(record.getMessage())
        path = found.group("path") if found else ""
        return "site-packages" in path or path.startswith(_THIRD_PARTY_ROOTS)
    return False


class LogFileOnly(logging.Filter):
    """On a terminal handler: dependency noise, and our own details for the log file
    (`stages.log_details`), are written to the root logger's log files instead (unless the
    record reaches them anyway) and not printed."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (is_dependency_noise(record) or is_log_file_only(record)):
            return True
        if not _reaches_root(record.name):
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.FileHandler):
                    handler.handle(record)
        return False


def _reaches_root(name: str) -> bool:
    logger: logging.Logger | None = logging.getLogger(name)
    while logger is not None and logger.parent is not None:
        if not logger.propagate:
            return False
        logger = logger.parent
    return True


def _terminal_handlers() -> list[logging.Handler]:
    loggers = [logging.getLogger(), *(logging.getLogger(p) for p in FILE_ONLY_LOGGERS)]
    return [
        handler
        for logger in loggers
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler)
        and not isinstance(handler, logging.FileHandler)
    ]


# Loggers that print through handlers of their own which their library re-creates (torch's
# logging setup replaces its handlers): filtered where the record is made, not where printed.
NOISY_LOGGERS = ("torch.utils._pytree",)


class ToLogFilesOnly(logging.Filter):
    """On a logger: its warnings and notices are written to the root's log files only."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.FileHandler):
                handler.handle(record)
        return False


def keep_dependency_noise_in_log_files() -> None:
    """Route Python warnings through logging and filter every terminal handler (idempotent)."""
    logging.captureWarnings(True)
    for handler in _terminal_handlers():
        if not any(isinstance(f, LogFileOnly) for f in handler.filters):
            handler.addFilter(LogFileOnly())
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ToLogFilesOnly) for f in logger.filters):
            logger.addFilter(ToLogFilesOnly())
