"""The CLI started as a process a test signals or kills, never left running: `start_cli` and
`wait_for_file`, with the `no_process_left` fixture that kills what a failing test left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli_runner import REPO

_STARTED: list[subprocess.Popen[str]] = []
# A hang guard, not a measure: generous under load.
WAIT_GUARD_S = 600


def _default_sigint() -> None:
    """In the child, before exec: SIGINT back to its default, so Python installs its Ctrl-C
    handler (a suite started as a background job ignores SIGINT, and children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_cli(args: list[str], cwd: Path, own_group: bool = False) -> subprocess.Popen[str]:
    """`python -m pipeline ARGS` in cwd, this checkout first on the path, output captured."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=own_group,  # so the test can kill it with its tracking process
        preexec_fn=_default_sigint if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else None,
    )
    _STARTED.append(process)
    return process


def wait_for_file(process: subprocess.Popen[str], path: Path, what: str) -> None:
    """Until `path` exists (the process announces where it is); fails if the process ends."""
    deadline = time.monotonic() + WAIT_GUARD_S
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.fixture
def no_process_left() -> Iterator[None]:
    """A failing test must not leave its pipeline sleeping where the test held it."""
    yield
    while _STARTED:
        process = _STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=60)
