"""The analyze stage on ETDumps of 1k to 1M events: its time and peak memory per size.

One pipeline run per size, the same model with more iterations (`runtime.iterations=N`; the
default ViT-Ti logs 241 events per iteration), then the analyze stage alone on that run dir in a
fresh process (`stages=[analyze] cache=false`), its wall time and peak RSS from `os.wait4`. The
slope between sizes (bytes of peak RSS per event) says whether memory grows with iterations.

    PYTHONPATH=. python benchmarks/bench_big_etdump.py --root /tmp/big_etdump
    PYTHONPATH=. python benchmarks/bench_big_etdump.py --root /tmp/big_etdump --code /other/checkout

Run dirs under --root are reused when they hold an ETDump (a 4,150-iteration run takes minutes);
--code analyses with another checkout's code (e.g. the one before streaming) on the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from stages.formats.artifacts import ArtifactName
from stages.formats.etdump.streaming import open_etdump

REPO = Path(__file__).resolve().parents[1]
ITERATIONS = (4, 42, 415, 4150)  # ~1k, 10k, 100k, 1M events of the default ViT-Ti
MIB = 1024 * 1024


def _timed(command: list[str], code: Path, log: Path) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (bytes) and exit status of a fresh process running `command`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def _pipeline(model: str, run_dir: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipeline",
        f"model={model}",
        "backend=xnnpack",
        "tracking=none",
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]


def _events(etdump: Path) -> int:
    return sum(len(block.events) for block in open_etdump(etdump).run_data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/tmp/big_etdump"))
    parser.add_argument("--model", default="vit")
    parser.add_argument("--iterations", type=int, nargs="+", default=list(ITERATIONS))
    parser.add_argument("--code", type=Path, default=REPO, help="checkout whose analyze runs")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.iterations:
        run_dir = args.root / f"{args.model}-{n}"
        if not (run_dir / ArtifactName.ETDUMP).is_file():
            # every iteration, however long they take (no time budget)
            command = _pipeline(
                args.model, run_dir, f"runtime.iterations={n}", "runtime.max_time_s=null"
            )
            seconds, rss, status = _timed(command, REPO, args.root / f"{args.model}-{n}.run.log")
            if status not in (0, 3):
                raise SystemExit(f"the pipeline run of {n} iterations failed: see {run_dir}")
            print(f"made {run_dir}: whole loop {seconds:.1f} s, peak RSS {rss / MIB:.0f} MiB")
        command = _pipeline(args.model, run_dir, "stages=[analyze]", "cache=false")
        log = args.root / f"{args.model}-{n}.analyze.log"
        seconds, rss, status = _timed(command, args.code, log)
        if status not in (0, 3):
            raise SystemExit(f"analyze of {run_dir} failed (exit {status}): see {log}")
        summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
        events = _events(run_dir / ArtifactName.ETDUMP)
        size = (run_dir / ArtifactName.ETDUMP).stat().st_size
        rows.append((n, events, size, seconds, summary["seconds"]["total"], rss))
    print(f"analyze with the code of {args.code}")
    print(
        "iterations  events     etdump MiB  process s  analyze stage s  peak RSS MiB  slope B/event"
    )
    for i, (n, events, size, seconds, stage, rss) in enumerate(rows):
        slope = ""
        if i:
            previous = rows[i - 1]
            slope = f"{(rss - previous[5]) / (events - previous[1]):.1f}"
        print(
            f"{n:>10}  {events:>9,}  {size / MIB:>10.1f}  {seconds:>9.1f}  {stage:>15.1f}  "
            f"{rss / MIB:>12.0f}  {slope:>13}"
        )


if __name__ == "__main__":
    main()
