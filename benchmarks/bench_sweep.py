"""Sweep wall time, the default parallel launcher against one by one (`hydra/launcher=basic`),
paired: each pair runs both variants back to back (their order alternating), each a new CLI
process in a fresh working directory (own MLflow store and stage cache); the ratio printed is
the median over the pairs of parallel ÷ one-by-one.

- 4 jobs: model=vit,mobilenet_v2 × backend=xnnpack,qnn (default precisions);
- 8 jobs: the same at backend.precision=fp16,int8.

    python benchmarks/bench_sweep.py [--pairs 3] [--sweeps 4,8] [--n-jobs 2]
The default launcher runs jobs side by side only on cores free when the sweep starts (Linux
shares CPU time between sessions, so on a machine other sessions keep busy it runs them one by
one); each parallel run prints what it chose. `--n-jobs 2` makes it use 2 workers whatever the
load. The load average before and after each run is printed: the machine may be shared.
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


def run_sweep(sweep: list[str], extra: list[str]) -> tuple[float, str]:
    """Wall seconds of one sweep command in a fresh directory and the launcher's choice (its
    `sweep: N jobs ...` line); raises if it failed."""
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
    output = result.stdout + result.stderr
    lines = output.splitlines()
    choice = next((line for line in lines if "] sweep: " in line and " job" in line), "")
    return seconds, choice.split("] sweep: ", 1)[-1][:70]


def main(pairs: int, sweeps: list[str], n_jobs: int | None) -> None:
    variants = dict(VARIANTS)
    if n_jobs is not None:
        variants["parallel"] = [f"hydra.launcher.n_jobs={n_jobs}"]
    for name in sweeps:
        ratios = []
        for pair in range(pairs):
            order = list(variants) if pair % 2 == 0 else list(reversed(variants))
            seconds = {}
            for variant in order:
                before = load_average()
                seconds[variant], choice = run_sweep(SWEEPS[name], variants[variant])
                shown = f"  [{choice}]" if variant == "parallel" else ""
                print(
                    f"{name} jobs, pair {pair + 1}, {variant:<10} {seconds[variant]:6.1f} s  "
                    f"(load {before} -> {load_average()}){shown}",
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
    parser.add_argument("--n-jobs", type=int, help="hydra.launcher.n_jobs for the parallel runs")
    args = parser.parse_args()
    chosen = [s.strip() for s in args.sweeps.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SWEEPS]
    if unknown or args.pairs < 1:
        parser.error(f"--sweeps takes {', '.join(SWEEPS)} (got {args.sweeps}); --pairs >= 1")
    main(args.pairs, chosen, args.n_jobs)
