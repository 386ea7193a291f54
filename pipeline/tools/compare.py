"""`python -m pipeline.tools.compare`: print and export the comparison of runs chosen by experiment/tags.

python -m pipeline.tools.compare --experiment delegate-debugger --tag model=vit --out cmp/
python -m pipeline.tools.compare --parent <sweep parent run id>
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.sweeps.comparison import compare_runs
from pipeline.tracking.client import tracking_client
from pipeline.tracking.store import resolve_tracking_uri


def _filter(tags: list[str], parent: str | None) -> str:
    clauses = []
    for tag in tags:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --tag {tag!r}: write it as KEY=VALUE (e.g. --tag model=vit)")
        clauses.append(f"tags.`{key}` = '{value}'")
    if parent:
        clauses.append(f"tags.`mlflow.parentRunId` = '{parent}'")
    clauses.append("attributes.status != 'RUNNING'")
    return " and ".join(clauses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.tools.compare", description=__doc__)
    parser.add_argument(
        "--uri",
        default=None,
        help="tracking URI (default: as python -m pipeline: $MLFLOW_TRACKING_URI, else outputs/mlflow.db)",
    )
    parser.add_argument("--experiment", default="delegate-debugger")
    parser.add_argument("--tag", action="append", default=[], help="KEY=VALUE, repeatable")
    parser.add_argument("--parent", default=None, help="only the child runs of this sweep run")
    parser.add_argument("--out", type=Path, default=Path("outputs/comparison"))
    args = parser.parse_args(argv)

    uri = resolve_tracking_uri(args.uri)
    client = tracking_client(uri)
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        print(
            f"error: no experiment {args.experiment!r} in {uri} (--experiment, --uri)",
            file=sys.stderr,
        )
        return 1
    found = client.search_runs(
        [experiment.experiment_id], filter_string=_filter(args.tag, args.parent), max_results=5000
    )
    runs = [r for r in found if r.data.tags.get("sweep") != "parent"]
    if not runs:
        print(
            "error: no finished runs match these --experiment/--tag/--parent filters",
            file=sys.stderr,
        )
        return 1
    comparison = compare_runs(client, runs, args.out.resolve())
    print(comparison.text)
    print(
        f"\n{len(runs)} runs; written: {comparison.runs}"
        + (f", {comparison.plot}" if comparison.plot else "")
        + "".join(f", {p}" for p in comparison.per_op)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
