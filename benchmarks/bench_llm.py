"""A billion-parameter-class LLM through the whole loop (issue 26.2): the zoo's decoder at
dim 2048, 16 layers, 16 heads (4 key/value heads), hidden 5632, 32k vocabulary, 128 tokens
(~0.85 B parameters, 3.4 GB in fp32, random weights), one cold `python -m pipeline ...
backend=xnnpack tracking=none` in a fresh directory (own cache and run dir).

    PYTHONPATH=. python benchmarks/bench_llm.py [--seq-len 128] [--layers 16] [--keep DIR]

Reports wall time, peak RSS of the whole process tree and per stage (benchmarks/cold_run.py),
each stage's seconds (the run's summary table), and the run directory's bytes (hard links counted once)
against the fp32 weights plus the debug buffer. Needs ~7+ GB free: run one at a time, on a
quiet machine.

Targets (issue 26.2): <= 120 s, peak RSS <= 2 x the fp32 weights, disk <= 1.2 x (weights +
debug buffer).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from cold_run import gb, model_overrides, parameters, run_cold, stage_seconds  # benchmarks/
from run_dir_bytes import tree_bytes  # benchmarks/, beside this script

MODEL = {
    "vocab_size": 32000,
    "dim": 2048,
    "layers": 16,
    "heads": 16,
    "kv_heads": 4,  # grouped-query attention, 4 query heads per key/value head (as TinyLlama)
    "hidden": 5632,
}


def command(seq_len: int, layers: int, work: Path) -> list[str]:
    """The measured command (printed, and quoted in RESULTS.md)."""
    model = {**MODEL, "layers": layers}
    return [
        sys.executable,
        "-m",
        "pipeline",
        "backend=xnnpack",
        "tracking=none",
        *model_overrides(model, seq_len, seq_len),
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={work / 'run'}",
    ]


def measure(seq_len: int, layers: int, work: Path) -> dict[str, object]:
    """One cold run in `work`: time, peak RSS (whole tree and per stage), disk, stage seconds."""
    argv = command(seq_len, layers, work)
    cold = run_cold(argv, work)
    if cold.exit_code != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{cold.log[-3000:]}")
    run_dir = work / "run"
    weights = 4 * parameters({**MODEL, "layers": layers})
    debug_buffer = (run_dir / "debug.bin").stat().st_size
    disk = tree_bytes(run_dir)
    return {
        "seconds": round(cold.seconds, 1),
        "stage_seconds": stage_seconds(cold.log),
        "parameters": weights // 4,
        "fp32_weights_gb": gb(weights),
        "peak_rss_gb": gb(cold.peak_tree_rss),
        "peak_rss_over_weights": round(cold.peak_tree_rss / weights, 3),
        "stage_peak_rss_gb": {k: gb(v) for k, v in cold.stage_peaks.items()},
        "run_dir_gb": gb(disk),
        "debug_buffer_gb": gb(debug_buffer),
        "disk_over_weights_plus_debug_buffer": round(disk / (weights + debug_buffer), 3),
        "files_mb": {
            p.name: round(p.stat().st_size / 1e6, 1)
            for p in sorted(run_dir.iterdir())
            if p.is_file() and p.stat().st_size > 1e6
        },
        "load_average": cold.load_average,
        "command": " ".join(argv[1:]).replace(str(work), "TMP"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per input (default 128)")
    parser.add_argument("--layers", type=int, default=16, help="decoder layers (default 16)")
    parser.add_argument("--keep", type=Path, help="copy the run's log and summary here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_llm_") as tmp:
        result = measure(args.seq_len, args.layers, Path(tmp))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path(tmp) / "process.log", args.keep / "process.log")
    result["targets_met"] = {
        "time <= 120 s": float(str(result["seconds"])) <= 120,
        "peak RSS <= 2 x weights": float(str(result["peak_rss_over_weights"])) <= 2,
        "disk <= 1.2 x (weights + debug buffer)": float(
            str(result["disk_over_weights_plus_debug_buffer"])
        )
        <= 1.2,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
