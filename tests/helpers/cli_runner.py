"""Run `python -m <module> ...` in a subprocess as a person would, from a given directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_module(
    module: str, *args: str, cwd: Path, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    """The repo on PYTHONPATH; $MLFLOW_TRACKING_URI unset so the default store is cwd/outputs."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
