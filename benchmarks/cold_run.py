"""One cold `python -m pipeline ...` in a fresh directory, measured as a whole process tree:
wall time, peak RSS of the tree (the sum over the process and all its descendants, sampled from
/proc every 50 ms, each sample attributed to the stage the log says is running), the largest
single process (os.wait4), the exit code and each stage's seconds (the run's summary table).
Shared by bench_llm.py and bench_llm_generation.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
STAGES = ("export", "lower", "run", "analyze")
_SUMMARY_ROW = re.compile(r"^(export|lower|run|analyze)\s+(\w+)\s+([\d.]+)\s+\d+\s*$")
_DONE = re.compile(r"\[(export|lower|run|analyze)\] (done|reused)")
_RSS = re.compile(r"VmRSS:\s+(\d+) kB")


def parameters(model: dict[str, int]) -> int:
    """Parameter count of the zoo decoder (embedding, layers, final norm, untied head)."""
    dim, hidden, vocab = model["dim"], model["hidden"], model["vocab_size"]
    kv_dim = model["kv_heads"] * dim // model["heads"]
    per_layer = 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden + 2 * dim
    return 2 * vocab * dim + model["layers"] * per_layer + dim


def model_overrides(model: dict[str, int], seq_len: int, tokens: int) -> list[str]:
    """The zoo `llm`'s overrides: its sizes, cache/sequence length and the input's shape."""
    kwargs = {**model, "seq_len": seq_len}
    return [
        "model=llm",
        *[f"model.kwargs.{k}={v}" for k, v in kwargs.items()],
        f"model.inputs=[{{shape:[1,{tokens}],dtype:int64,high:{model['vocab_size']}}}]",
    ]


def tree_rss(root: int) -> int:
    """Bytes resident in `root` and every process descending from it, now."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid and p not in tree]
        tree.update(children)
        frontier += children
    total = 0
    for pid in tree:
        try:
            match = _RSS.search(Path(f"/proc/{pid}/status").read_text())
        except OSError:
            continue
        total += int(match.group(1)) * 1024 if match else 0
    return total


class TreeRss:
    """Samples the process tree's RSS, attributing each sample to the stage then running."""

    def __init__(self, pid: int, log: Path) -> None:
        self.pid, self.log = pid, log
        self.peaks = dict.fromkeys(STAGES, 0)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _finished(self) -> int:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return 0
        return len(_DONE.findall(text))

    def _sample(self) -> None:
        while not self._stop.is_set():
            rss = tree_rss(self.pid)
            self.peak = max(self.peak, rss)
            finished = self._finished()
            if finished < len(STAGES):
                self.peaks[STAGES[finished]] = max(self.peaks[STAGES[finished]], rss)
            time.sleep(0.05)


def stage_seconds(log_text: str) -> dict[str, float]:
    """Seconds per stage from the run's `== pipeline summary ==` table."""
    found = {}
    for line in log_text.splitlines():
        match = _SUMMARY_ROW.match(line.strip())
        if match:
            found[match.group(1)] = float(match.group(3))
    return found


@dataclass
class ColdRun:
    """What one measured command did."""

    seconds: float
    exit_code: int
    log: str
    peak_tree_rss: int
    largest_process_rss: int
    stage_peaks: dict[str, int] = field(default_factory=dict)
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)


def run_cold(argv: list[str], work: Path, log_name: str = "process.log") -> ColdRun:
    """Run `argv` in `work` (its output to a file, never a pipe nobody reads) and measure it."""
    log = work / log_name
    with log.open("w") as out:
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=work, env=ENV, stdout=out, stderr=out)
        with TreeRss(process.pid, log) as sampler:
            _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    return ColdRun(
        seconds=seconds,
        exit_code=os.waitstatus_to_exitcode(status),
        log=log.read_text(errors="replace"),
        peak_tree_rss=max(sampler.peak, usage.ru_maxrss * 1024),
        largest_process_rss=usage.ru_maxrss * 1024,
        stage_peaks=dict(sampler.peaks),
        load_average=os.getloadavg(),
    )


def gb(size: float) -> float:
    return round(size / 1e9, 3)
