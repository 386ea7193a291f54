"""`python -m pipeline.tools.sync --from sqlite:///RUN_DIR/offline_mlflow/mlflow.db --to http://host:port`

Uploads runs logged to a local fallback store (tracking server unreachable at the time) to the
server: params, tags, full metric histories, artifacts and status. A run synced once is tagged
`synced_to` in the source and skipped next time, so the command can be repeated safely. A run
logged as a sweep job keeps its link to the sweep's parent run when the server has that parent.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.tracking.mlflow_tracker import server_reachable
from pipeline.tracking.offline_sync import sync_runs
from pipeline.tracking.store import sqlite_database


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.tools.sync", description=__doc__)
    parser.add_argument("--from", dest="source", required=True, help="the local store's URI")
    parser.add_argument("--to", dest="target", required=True, help="the tracking server's URI")
    args = parser.parse_args(argv)
    source_db = sqlite_database(args.source)
    if source_db is not None and not source_db.is_file():
        print(f"error: --from {args.source}: no such store file", file=sys.stderr)
        return 1
    if not server_reachable(args.target):
        print(
            f"error: --to {args.target} is unreachable; start the server and retry", file=sys.stderr
        )
        return 1
    synced = sync_runs(args.source, args.target)
    for run in synced:
        print(f"synced run {run.source_id} -> {run.target_id} (experiment {run.experiment})")
    print(f"{len(synced)} run(s) uploaded to {args.target}" if synced else "nothing to sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
