"""Runs whose process died without ending them (SIGKILL, power loss) are found and marked KILLED.

Every tracking run is tagged with the host, pid and process start time of the process that
logs it. A later start looks at the store's RUNNING runs from this host: a run whose process no
longer exists (or whose pid now belongs to a younger process) can never finish, so it is marked
KILLED with a tag saying how it was found. Runs from other hosts are left alone.

The same check on demand: `python -m pipeline.tracking.liveness [--tracking-uri URI]` (default: the
store `python -m pipeline` would use from this directory).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("pipeline")

HOST_TAG = "process.host"
PID_TAG = "process.pid"
START_TAG = "process.start_ticks"
KILLED_REASON_TAG = "killed_reason"


def process_start_ticks(pid: int) -> str:
    """When the process started (clock ticks since boot, from /proc), '' where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces; fields after its closing ')' are plain.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def process_tags() -> dict[str, str]:
    """Tags naming this process, so a later start can tell whether the run is still alive."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), START_TAG: process_start_ticks(pid)}


def process_alive(pid: int, start_ticks: str) -> bool:
    """True when `pid` exists on this host and (if recorded) is the same process as then."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    if start_ticks:
        now = process_start_ticks(pid)
        return not now or now == start_ticks
    return True


def mark_dead_runs_killed(client: Any, experiment_ids: list[str] | None = None) -> list[str]:
    """Mark RUNNING runs of this host whose process is gone as KILLED; their run ids."""
    if experiment_ids is None:
        experiment_ids = [e.experiment_id for e in client.search_experiments()]
    if not experiment_ids:
        return []
    host = socket.gethostname()
    running = client.search_runs(
        experiment_ids,
        filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'",
        max_results=10_000,
    )
    killed = []
    for run in running:
        tags = run.data.tags
        pid_text = tags.get(PID_TAG, "")
        if not pid_text.isdigit() or process_alive(int(pid_text), tags.get(START_TAG, "")):
            continue
        reason = (
            f"process {pid_text} on {host} is gone but never ended the run (killed hard, or "
            "a sweep interrupted); found by a later start"
        )
        client.set_tag(run.info.run_id, KILLED_REASON_TAG, reason)
        client.set_terminated(run.info.run_id, status="KILLED")
        log.warning("tracking run %s: %s; marked KILLED", run.info.run_id, reason)
        killed.append(run.info.run_id)
    return killed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.tracking.liveness", description=__doc__
    )
    parser.add_argument("--tracking-uri", help="the MLflow store (default: as python -m pipeline)")
    args = parser.parse_args(argv)
    from mlflow.tracking import MlflowClient

    from pipeline.tracking.store import resolve_tracking_uri, sqlite_database

    uri = resolve_tracking_uri(args.tracking_uri)
    database = sqlite_database(uri)
    if database is not None and not database.is_file():
        print(f"error: {uri}: no such store file", file=sys.stderr)
        return 1
    killed = mark_dead_runs_killed(MlflowClient(tracking_uri=uri))
    print(f"{len(killed)} run(s) marked KILLED in {uri}" + "".join(f"\n  {r}" for r in killed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
