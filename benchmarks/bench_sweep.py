"""4-job sweep wall time (vit, mobilenet_v2 × xnnpack, qnn; default model sizes), side by side:

- joblib launcher with n_jobs=2 vs the basic (sequential) launcher, shared export on;
- shared export (stage cache) on vs off (`cache=false`), with each launcher.

    python benchmarks/bench_sweep.py
Each variant runs in a fresh working directory (own MLflow store and cache) as a new CLI process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEP = ["model=vit,mobilenet_v2", "backend=xnnpack,qnn"]
VARIANTS = {
    "joblib n_jobs=2, shared export": ["hydra.launcher.n_jobs=2"],
    "basic launcher, shared export": ["hydra/launcher=basic"],
    "joblib n_jobs=2, no shared export": ["hydra.launcher.n_jobs=2", "cache=false"],
    "basic launcher, no shared export": ["hydra/launcher=basic", "cache=false"],
}


def main() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    seconds: dict[str, float] = {}
    for name, extra in VARIANTS.items():
        work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
        started = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline",
                "-m",
                *SWEEP,
                *extra,
                f"hydra.sweep.dir={work / 'sweep'}",
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        seconds[name] = time.perf_counter() - started
        status = "ok" if result.returncode == 0 else f"FAILED\n{result.stderr[-2000:]}"
        exports = sum(p.read_text().count("[export] running") for p in work.glob("sweep/*/*.log"))
        print(f"{name:<36} {seconds[name]:7.1f} s  exports run: {exports}  {status}", flush=True)
    base = seconds["joblib n_jobs=2, shared export"]
    print(f"basic ÷ joblib:               {seconds['basic launcher, shared export'] / base:.2f}")
    joblib_ratio = seconds["joblib n_jobs=2, no shared export"] / base
    basic_ratio = (
        seconds["basic launcher, no shared export"] / seconds["basic launcher, shared export"]
    )
    print(f"no shared export ÷ shared, joblib: {joblib_ratio:.2f}; basic: {basic_ratio:.2f}")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
