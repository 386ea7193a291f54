"""ETDumps written by ExecuTorch 1.5.1's own runtime, for tests that read foreign ETDumps.

First choice: the company's shared fixtures, `shared/fixtures/executorch-1.5.1/` above the
checkout (../shared here) or $EXECUTORCH_FIXTURES. Without them, ExecuTorch itself writes files
of the same kind (tests/make_executorch_etdumps.py) with $EXECUTORCH_PYTHON, the side venv that
.ci/run installs, once per checkout. With neither, the test fails saying what is missing.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RELATIVE = Path("shared") / "fixtures" / "executorch-1.5.1"
GENERATED = REPO / ".pytest_cache" / "executorch-etdumps"
_FILES = ("etdump_1run.etdp", "etdump_1run_debug.etdp", "debug_buffer_1run.bin")


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in _FILES)


def _generate(python: str) -> Path:
    GENERATED.mkdir(parents=True, exist_ok=True)
    with (GENERATED / ".lock").open("a") as lock:  # xdist workers: one of them writes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _complete(GENERATED):
            made = subprocess.run(
                [python, str(REPO / "tests" / "make_executorch_etdumps.py"), str(GENERATED)],
                env={**os.environ, "PYTHONPATH": str(REPO)},
                capture_output=True,
                text=True,
                timeout=900,
            )
            if made.returncode != 0:
                pytest.fail(f"ExecuTorch could not write ETDumps:\n{made.stderr[-3000:]}")
    return GENERATED


def executorch_fixtures() -> Path:
    override = os.environ.get("EXECUTORCH_FIXTURES")
    candidates = [Path(override)] if override else []
    candidates += [parent / RELATIVE for parent in REPO.parents]
    for candidate in candidates:
        if _complete(candidate):
            return candidate
    python = os.environ.get("EXECUTORCH_PYTHON")
    if python and Path(python).is_file():
        return _generate(python)
    pytest.fail(
        f"No ETDumps written by ExecuTorch: {RELATIVE} is not above {REPO}, $EXECUTORCH_FIXTURES "
        "is unset, and $EXECUTORCH_PYTHON (the side venv .ci/run installs) is not set to write them"
    )
