"""Full tracebacks go to the run's log file (attached to the run dir when Hydra attached none);
the terminal gets the one line that says what failed."""

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


def attach_log_file(run_dir: Path) -> logging.Handler | None:
    """Without Hydra's job logging, still keep a log file in the run dir: the handler to remove
    when the invocation ends, or None when a log file is attached already."""
    root = logging.getLogger()
    if any(isinstance(h, logging.FileHandler) for h in root.handlers):
        return None
    handler = logging.FileHandler(run_dir / "pipeline.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] %(message)s"))
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler
