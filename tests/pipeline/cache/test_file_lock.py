"""The one file lock (stage cache entries, first use of a sqlite MLflow store) excludes other
processes while it is held."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline.cache.file_lock import file_lock
from tests.helpers.cli_runner import REPO

_TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as fh:
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held")
    else:
        print("free")
"""


def _other_process_sees(lock: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _TRY_LOCK, str(lock)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=True,
    )
    return done.stdout.strip()


def test_another_process_waits_while_the_lock_is_held(tmp_path: Path) -> None:
    lock = tmp_path / "new" / "dir" / "entry.lock"
    with file_lock(lock):
        assert lock.is_file()
        assert _other_process_sees(lock) == "held"
    assert _other_process_sees(lock) == "free"
