"""Cost against model size, side by side with ExecuTorch's own loop (issue 26.1): ViT-Ti, -S and
-B at 224 (12 blocks), each our cold `python -m pipeline` (tracking off, fresh directory) and
`benchmarks/executorch_loop.py` on the same model, one after the other. Wall time and peak RSS
of each whole process (os.wait4), and the bytes our run directory holds.

    PYTHONPATH=. python benchmarks/bench_scale.py [--reps 1] [--sizes Ti,S,B]

Targets (issue 26.1): ours / ExecuTorch's <= 0.2 at ViT-Ti and <= 0.25 at ViT-B; our peak RSS
<= 1/2 of ExecuTorch's at every size; disk per ViT-B run <= 1.2 x (program + debug buffer).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_dir_bytes import tree_bytes  # benchmarks/, beside this script

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
# name: (dim, heads, ExecuTorch's debug buffer in MiB, sized up front as it must be)
SIZES = {"Ti": (192, 3, 256), "S": (384, 6, 512), "B": (768, 12, 1024)}


def _measured(command: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one whole process."""
    log = cwd / "process.log"
    with log.open("w") as out:  # a file, never a pipe nobody reads (it would block the child)
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=ENV, stdout=out, stderr=out)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{log.read_text()[-3000:]}")
    return seconds, usage.ru_maxrss / 1024


STAGE_ROW = re.compile(r"^(export|lower|run|analyze)\s+(done|reused)\s+([0-9.]+)", re.MULTILINE)


def _stage_seconds(work: Path) -> dict[str, float]:
    """Per-stage seconds from the summary our command printed into process.log."""
    text = (work / "process.log").read_text(errors="replace")
    return {f"{m[1]}_s": float(m[3]) for m in STAGE_ROW.finditer(text)}


def _ours(dim: int, heads: int, work: Path) -> dict[str, float]:
    run_dir = work / "run"
    command = [
        sys.executable,
        "-m",
        "pipeline",
        "model=vit",
        "backend=xnnpack",
        "tracking=none",
        f"model.kwargs.dim={dim}",
        f"model.kwargs.heads={heads}",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={run_dir}",
    ]
    seconds, rss = _measured(command, work)
    program = (run_dir / "exported.pt2").stat().st_size + (run_dir / "debug.bin").stat().st_size
    return {
        "seconds": seconds,
        **_stage_seconds(work),
        "peak_rss_mib": rss,
        "run_dir_mb": tree_bytes(run_dir) / 1e6,
        "disk_ratio": tree_bytes(run_dir) / program,
    }


def _executorch(dim: int, heads: int, buffer_mb: int, work: Path) -> dict[str, float]:
    script = str(REPO / "benchmarks" / "executorch_loop.py")
    command = [sys.executable, script, str(work / "et"), f"--dim={dim}", f"--heads={heads}"]
    seconds, rss = _measured([*command, f"--debug-buffer-mb={buffer_mb}"], work)
    return {"seconds": seconds, "peak_rss_mib": rss}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=1, help="pairs per size (medians printed)")
    parser.add_argument("--sizes", default="Ti,S,B", help="comma-separated: Ti, S, B")
    args = parser.parse_args()
    results = {}
    for name in args.sizes.split(","):
        dim, heads, buffer_mb = SIZES[name]
        ours, theirs = [], []
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory(prefix=f"bench_scale_{name}_") as tmp:
                ours.append(_ours(dim, heads, Path(tmp)))
            with tempfile.TemporaryDirectory(prefix=f"bench_scale_{name}_et_") as tmp:
                theirs.append(_executorch(dim, heads, buffer_mb, Path(tmp)))

        def med(rows: list[dict[str, float]], key: str) -> float:
            return round(statistics.median(r[key] for r in rows), 3)

        results[f"ViT-{name}"] = {
            "ours_s": med(ours, "seconds"),
            "ours_stages_s": {k: med(ours, k) for k in ours[0] if k.endswith("_s")},
            "executorch_s": med(theirs, "seconds"),
            "time_ratio": round(med(ours, "seconds") / med(theirs, "seconds"), 3),
            "ours_peak_rss_mib": med(ours, "peak_rss_mib"),
            "executorch_peak_rss_mib": med(theirs, "peak_rss_mib"),
            "rss_ratio": round(med(ours, "peak_rss_mib") / med(theirs, "peak_rss_mib"), 3),
            "our_run_dir_mb": med(ours, "run_dir_mb"),
            "disk_over_program_plus_debug_buffer": med(ours, "disk_ratio"),
        }
        print(json.dumps({f"ViT-{name}": results[f"ViT-{name}"]}), flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
