"""Sweep wall time, the default parallel launcher against one by one (`hydra/launcher=basic`),
paired: each pair runs both variants back to back (their order alternating), each a new CLI
process in a fresh working directory (own MLflow store and stage cache); the ratio printed is
the median over the pairs of parallel ÷ one-by-one.

- 4 jobs: model=vit,mobilenet_v2 × backend=xnnpack,qnn (default precisions);
- 8 jobs: the same at backend.precision=fp16,int8.

    python benchmarks/bench_sweep.py [--pairs 3] [--sweeps 4,8]
The load average before and after each run is printed: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEPS = {
    "4": ["model=vit,mobilenet_v2", "backend=xnnpack,qnn"],
    "8": ["model=vit,mobilenet_v2", "backend=xnnpack,qnn", "backend.precision=fp16,int8"],
}
VARIANTS = {"parallel": [], "one by one": ["hydra/launcher=basic"]}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_sweep(sweep: list[str], extra: list[str]) -> float:
    """Wall seconds of one sweep command in a fresh directory; raises if it failed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        work = Path(tmp)
        command = [sys.executable, "-m", "pipeline", "-m", *sweep, *extra]
        started = time.perf_counter()
        result = subprocess.run(
            [*command, f"hydra.sweep.dir={work / 'sweep'}"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return seconds


def main(pairs: int, sweeps: list[str]) -> None:
    for name in sweeps:
        ratios = []
        for pair in range(pairs):
            order = list(VARIANTS) if pair % 2 == 0 else list(reversed(VARIANTS))
            seconds = {}
            for variant in order:
                before = load_average()
                seconds[variant] = run_sweep(SWEEPS[name], VARIANTS[variant])
                print(
                    f"{name} jobs, pair {pair + 1}, {variant:<10} {seconds[variant]:6.1f} s  "
                    f"(load {before} -> {load_average()})",
                    flush=True,
                )
            ratios.append(seconds["parallel"] / seconds["one by one"])
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        print(
            f"{name} jobs: parallel ÷ one by one, median of {pairs}: "
            f"{statistics.median(ratios):.2f} ({shown})",
            flush=True,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=3, help="paired runs per sweep (>= 1)")
    parser.add_argument("--sweeps", default="4,8", help="which sweeps: 4, 8 or 4,8")
    args = parser.parse_args()
    chosen = [s.strip() for s in args.sweeps.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SWEEPS]
    if unknown or args.pairs < 1:
        parser.error(f"--sweeps takes {', '.join(SWEEPS)} (got {args.sweeps}); --pairs >= 1")
    main(args.pairs, chosen)
