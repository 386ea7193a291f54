"""A billion-parameter-class LLM through the whole loop (issue 26.2): the zoo's decoder at
dim 2048, 16 layers, 16 heads (4 key/value heads), hidden 5632, 32k vocabulary, 128 tokens
(~0.85 B parameters, 3.4 GB in fp32, random weights), one cold `python -m pipeline ...
backend=xnnpack tracking=none` in a fresh directory (own cache and run dir).

    PYTHONPATH=. python benchmarks/bench_llm.py [--seq-len 128] [--layers 16] [--keep DIR]

Reports wall time, peak RSS of the whole process (os.wait4) and per stage (sampled from
/proc/<pid>/status while the stage's "[stage] done" line has not yet appeared), each stage's
seconds (the run's summary table), and the run directory's bytes (hard links counted once)
against the fp32 weights plus the debug buffer. Needs ~7+ GB free: run one at a time, on a
quiet machine.

Targets (issue 26.2): <= 120 s, peak RSS <= 2 x the fp32 weights, disk <= 1.2 x (weights +
debug buffer).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from run_dir_bytes import tree_bytes  # benchmarks/, beside this script

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
STAGES = ("export", "lower", "run", "analyze")
MODEL = {
    "vocab_size": 32000,
    "dim": 2048,
    "layers": 16,
    "heads": 16,
    "kv_heads": 4,  # grouped-query attention, 4 query heads per key/value head (as TinyLlama)
    "hidden": 5632,
}
_SUMMARY_ROW = re.compile(r"^(export|lower|run|analyze)\s+(\w+)\s+([\d.]+)\s+\d+\s*$")
_DONE = re.compile(r"\[(export|lower|run|analyze)\] (done|reused)")


def command(seq_len: int, layers: int, work: Path) -> list[str]:
    """The measured command (printed, and quoted in RESULTS.md)."""
    kwargs = {**MODEL, "layers": layers, "seq_len": seq_len}
    return [
        sys.executable,
        "-m",
        "pipeline",
        "model=llm",
        "backend=xnnpack",
        "tracking=none",
        *[f"model.kwargs.{k}={v}" for k, v in kwargs.items()],
        f"model.inputs=[{{shape:[1,{seq_len}],dtype:int64,high:{MODEL['vocab_size']}}}]",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={work / 'run'}",
    ]


def parameters(layers: int) -> int:
    """Parameter count of the decoder (embedding, layers, final norm, untied head)."""
    dim, hidden, vocab = MODEL["dim"], MODEL["hidden"], MODEL["vocab_size"]
    kv_dim = MODEL["kv_heads"] * dim // MODEL["heads"]
    per_layer = 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden + 2 * dim
    return 2 * vocab * dim + layers * per_layer + dim


class StageRss:
    """Samples a child's RSS, attributing each sample to the stage its log says is running."""

    def __init__(self, pid: int, log: Path) -> None:
        self.pid, self.log = pid, log
        self.peaks = dict.fromkeys(STAGES, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> StageRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _current_stage(self, offset: int, finished: int) -> tuple[int, int]:
        try:
            with self.log.open("rb") as fh:
                fh.seek(offset)
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            return offset, finished
        complete = text.rfind("\n") + 1
        finished += len(_DONE.findall(text[:complete]))
        return offset + len(text[:complete].encode()), finished

    def _sample(self) -> None:
        offset = finished = 0
        while not self._stop.is_set():
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            match = re.search(r"VmRSS:\s+(\d+) kB", status)
            offset, finished = self._current_stage(offset, finished)
            if match and finished < len(STAGES):
                stage = STAGES[finished]
                self.peaks[stage] = max(self.peaks[stage], int(match.group(1)) * 1024)
            time.sleep(0.05)


def stage_seconds(log_text: str) -> dict[str, float]:
    """Seconds per stage from the run's `== pipeline summary ==` table."""
    found = {}
    for line in log_text.splitlines():
        match = _SUMMARY_ROW.match(line.strip())
        if match:
            found[match.group(1)] = float(match.group(3))
    return found


def measure(seq_len: int, layers: int, work: Path) -> dict[str, object]:
    """One cold run in `work`: time, peak RSS (whole and per stage), disk, stage seconds."""
    argv = command(seq_len, layers, work)
    log = work / "process.log"
    with log.open("w") as out:  # a file, never a pipe nobody reads (it would block the child)
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=work, env=ENV, stdout=out, stderr=out)
        with StageRss(process.pid, log) as sampler:
            _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    text = log.read_text()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{text[-3000:]}")
    run_dir = work / "run"
    weights = 4 * parameters(layers)
    debug_buffer = (run_dir / "debug.bin").stat().st_size
    disk = tree_bytes(run_dir)
    peak = usage.ru_maxrss * 1024
    return {
        "seconds": round(seconds, 1),
        "stage_seconds": stage_seconds(text),
        "parameters": parameters(layers),
        "fp32_weights_gb": round(weights / 1e9, 3),
        "peak_rss_gb": round(peak / 1e9, 3),
        "peak_rss_over_weights": round(peak / weights, 3),
        "stage_peak_rss_gb": {k: round(v / 1e9, 3) for k, v in sampler.peaks.items()},
        "run_dir_gb": round(disk / 1e9, 3),
        "debug_buffer_gb": round(debug_buffer / 1e9, 3),
        "disk_over_weights_plus_debug_buffer": round(disk / (weights + debug_buffer), 3),
        "files_mb": {
            p.name: round(p.stat().st_size / 1e6, 1)
            for p in sorted(run_dir.iterdir())
            if p.is_file() and p.stat().st_size > 1e6
        },
        "load_average": os.getloadavg(),
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
