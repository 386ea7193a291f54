"""Full tracebacks go to the run's log file; the terminal gets the one line that says what failed."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

log = logging.getLogger("pipeline")


def log_traceback_to_files(message: str = "traceback") -> Path | None:
    """Write the current exception's traceback to the root logger's file handlers only; the
    first such file, or None when no log file is attached."""
    record = log.makeRecord(
        log.name, logging.ERROR, __file__, 0, "%s:\n%s", (message, traceback.format_exc()), None
    )
    first: Path | None = None
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
            handler.flush()
            first = first or Path(handler.baseFilename)
    return first
