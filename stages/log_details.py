"""Our own lines that belong in the run's log file, not on the terminal: the per-item details of
a finding the terminal states once (forty ops whose expected error fell back to the floor are one
warning line; each op and its reason is a line of the log file and a field of summary.json).

Records of loggers under `LOG_FILE_ONLY` below ERROR are kept off the terminal by the pipeline
(`pipeline.tracking.dependency_logs`), as third-party noise is; without it they print as usual.
"""

from __future__ import annotations

import logging

LOG_FILE_ONLY = "delegate_debugger.log_file_only"


def log_file_only(name: str) -> logging.Logger:
    """A logger whose INFO and WARNING lines go to the run's log file only."""
    return logging.getLogger(f"{LOG_FILE_ONLY}.{name}")


def is_log_file_only(record: logging.LogRecord) -> bool:
    """A detail for the log file: from a `log_file_only` logger, not an error."""
    name = record.name
    return record.levelno < logging.ERROR and (
        name == LOG_FILE_ONLY or name.startswith(LOG_FILE_ONLY + ".")
    )
