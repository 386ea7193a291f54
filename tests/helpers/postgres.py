"""A throwaway PostgreSQL (Debian's `postgresql`) on 127.0.0.1 for team-server tests.

initdb refuses to run as root, so as root the cluster belongs to the `postgres` user the
package creates; its data lives in a fresh temporary directory that it owns.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

POSTGRES_HINT = "Debian's postgresql: apt-get install postgresql (.ci/run installs it)"


def postgres_bin_dir() -> Path:
    """The directory with initdb, pg_ctl and createdb (Debian keeps them off PATH), else skip."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    found = versions[-1] if versions else shutil.which("initdb")
    if not found:
        pytest.skip(f"needs PostgreSQL: {POSTGRES_HINT}")
    return Path(found).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(command: list[str]) -> list[str]:
    """Run as the `postgres` user when we are root (initdb and postgres refuse root)."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def running_postgres(database: str = "mlflow") -> Iterator[str]:
    """A PostgreSQL server with `database`, yielding its SQLAlchemy URI; stopped on exit."""
    bin_dir = postgres_bin_dir()
    root = Path(tempfile.mkdtemp(prefix="pg-"))
    data, log = root / "data", root / "server.log"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    run = lambda *cmd: subprocess.run(  # noqa: E731
        _as_owner([str(c) for c in cmd]), check=True, capture_output=True, text=True, timeout=120
    )
    try:
        run(bin_dir / "initdb", "-D", data, "-U", "mlflow", "-A", "trust", "--no-sync")
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(bin_dir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "start")
        run(bin_dir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "mlflow", database)
        yield f"postgresql://mlflow@127.0.0.1:{port}/{database}"
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"PostgreSQL did not start: {exc.stderr}\n{_tail(log)}")
    finally:
        subprocess.run(
            _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


def _tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.is_file() else ""
