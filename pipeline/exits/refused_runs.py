"""A command refused before any stage ran leaves no run directory: Hydra makes one (its `.hydra`
config and the log) before the options are checked, and a directory named after a model that
never ran only misleads."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

HYDRA_ONLY = frozenset({".hydra", "delegate-debugger.log"})  # what Hydra writes on its own


def remove_untouched_run_dir(run_dir: Path) -> bool:
    """Remove `run_dir` when it holds nothing but what Hydra wrote; True when removed."""
    if not run_dir.is_dir():
        return False
    names = {p.name for p in run_dir.iterdir()}
    if not names <= HYDRA_ONLY:
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    with contextlib.suppress(OSError):  # the day's folder, when this was its only run
        run_dir.parent.rmdir()
    return True
