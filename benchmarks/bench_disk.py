"""Bytes on disk per run, MLflow store included (issue 10: each artifact stored once).

    PYTHONPATH=. python benchmarks/bench_disk.py

A default `model=vit backend=xnnpack` run and a 4-job sweep (vit, mobilenet_v2 × xnnpack, qnn),
each in a fresh directory; hard-linked files count once (as `du` counts them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ENV.pop("MLFLOW_TRACKING_URI", None)


def disk_bytes(root: Path) -> tuple[int, Counter[str]]:
    """Total bytes of distinct inodes under root, and bytes by file name."""
    seen: set[tuple[int, int]] = set()
    by_name: Counter[str] = Counter()
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            info = os.lstat(os.path.join(directory, name))
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_size
            by_name[name] += info.st_size
    return total, by_name


def _measure(label: str, args: list[str], jobs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench_disk_") as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", *args],
            cwd=tmp,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            raise SystemExit(f"{label} failed:\n{done.stderr[-3000:]}")
        total, by_name = disk_bytes(Path(tmp))
    largest = ", ".join(f"{name} {size / 1e6:.1f}" for name, size in by_name.most_common(5))
    print(
        f"{label}: {total / 1e6:.1f} MB on disk in all, {total / jobs / 1e6:.1f} MB per job "
        f"(largest, MB: {largest})"
    )


def main() -> None:
    _measure("default vit/xnnpack run", ["model=vit", "backend=xnnpack"], 1)
    _measure(
        "4-job sweep vit,mobilenet_v2 x xnnpack,qnn",
        ["-m", "model=vit,mobilenet_v2", "backend=xnnpack,qnn"],
        4,
    )


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
