"""Run a CLI in its own session and list the processes of that session still alive after it exits.

Every process a command starts (joblib/loky workers, the tracking child, servers) inherits its
session unless it calls setsid itself, so the session id finds them after the parent is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.cli_runner import REPO


@dataclass(frozen=True)
class Survivor:
    """A process of the command's session alive after the command exited."""

    pid: int
    cmdline: str


def session_members(session_id: int) -> list[Survivor]:
    """Live (not zombie) processes whose session id is `session_id`, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # ended while we looked
            continue
        state, _ppid, _pgrp, session = stat[stat.rindex(")") + 2 :].split()[:4]
        if int(session) == session_id and state != "Z":
            found.append(Survivor(int(entry.name), cmdline))
    return found


def run_in_own_session(
    *python_args: str, cwd: Path, timeout: int = 600
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`python ARGS` (e.g. "-m", "pipeline", ...) as the leader of a new session; returns
    (result, session id)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    # Output to files, not pipes: waiting on a pipe would also wait for every process holding it.
    out, err = cwd / "session.stdout", cwd / "session.stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, *python_args],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        child.wait(timeout=timeout)
    result = subprocess.CompletedProcess(
        child.args, child.returncode, out.read_text(), err.read_text()
    )
    return result, child.pid


def survivors_after(session_id: int, grace_s: float = 0.0) -> list[Survivor]:
    """The session's processes still alive `grace_s` after the leader exited; by default at the
    moment it exited: a process the command ended itself is gone by then."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = session_members(session_id)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.2)


def kill_session(survivors: list[Survivor]) -> None:
    """End what a failing test found, so it does not outlive the test either."""
    for proc in survivors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
