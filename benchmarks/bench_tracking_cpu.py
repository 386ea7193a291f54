"""CPU seconds of the MLflow tracking process's steps, on a new sqlite store (the cold run's case).

    PYTHONPATH=. python benchmarks/bench_tracking_cpu.py [--reps 3]

Each rep is a fresh Python process in a fresh directory that does what `pipeline.tracking.worker`
does for one run: import MLflow, open the store (MLflow creates and migrates it), start a run,
log metrics, finish. Process CPU time (user + system) around each step; medians printed. It is
the CPU that a loaded machine charges the cold loop for tracking (RESULTS.md, *Whole loop*).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ENV.pop("MLFLOW_TRACKING_URI", None)

STEPS = r"""
import gc, json, time
gc.disable()  # as the worker does
marks = [time.process_time()]
from mlflow.tracking import MlflowClient
marks.append(time.process_time())
from pipeline.tracking.mlflow_tracker import MlflowTracker
from pipeline.tracking.store import resolve_tracking_uri
tracker = MlflowTracker(uri=resolve_tracking_uri(), experiment="bench")
marks.append(time.process_time())
tracker.start("bench", {"model": "vit"}, {}, "model: vit\n")
tracker.log_metrics({f"m{i}": float(i) for i in range(200)})
tracker.finish(failed=False)
marks.append(time.process_time())
names = ["import MLflow", "open a new store", "start, log, finish"]
print(json.dumps(dict(zip(names, (b - a for a, b in zip(marks, marks[1:]))))))
"""


def _one() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench_tracking_") as tmp:
        done = subprocess.run(
            [sys.executable, "-c", STEPS], cwd=tmp, env=ENV, capture_output=True, text=True
        )
    if done.returncode != 0:
        raise SystemExit(f"the tracking steps failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    runs = [_one() for _ in range(args.reps)]
    for step in runs[0]:
        values = [run[step] for run in runs]
        print(f"{step}: median {statistics.median(values):.2f} s CPU ({args.reps} reps)")
    totals = [sum(run.values()) for run in runs]
    print(f"all steps: median {statistics.median(totals):.2f} s CPU")


if __name__ == "__main__":
    main()
