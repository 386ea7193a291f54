"""The corpus of architectures nobody here wrote (issue 44.1): each Hugging Face architecture of
stages.export.zoo.hf_corpus x precision x backend through the whole pipeline, as a user runs it.

    PYTHONPATH=. python benchmarks/bench_corpus.py --out corpus.json          # the whole corpus
    PYTHONPATH=. python benchmarks/bench_corpus.py --models resnet bert --precisions int8 \\
        --backends executorch_xnnpack                                         # a slice

Each run is the CLI (`python -m pipeline`, tracking=none, one stage cache for all runs) in a
process of its own, so a crash is a row, not the end; `--jobs N` runs N at once with
2 // N torch threads each (jobs x threads <= the machine's 2 cores). Per run: lowered
(lowering.json has a partition), verdict, exit code, per-op rows / delegated ops, end-to-end
SNR and top-1 agreement, seconds (wall, the process). executorch_xnnpack runs with
runtime.observe=tap (every op's value inside XNNPACK's partitions). Seconds depend on the
machine's load: taken on a shared machine, they are what a user waits, not a precise figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.export.zoo.hf_corpus_specs import CORPUS
from stages.safe_io.atomic_write import write_text_atomic

PRECISIONS = ("int8", "fp16", "fp32")  # in the order they run: int8 finds the most
BACKENDS = ("executorch_xnnpack", "xnnpack")
CORES = 2
TIMEOUT_S = 1800


@dataclass(frozen=True)
class Job:
    """One architecture at one precision on one backend."""

    arch: str
    precision: str
    backend: str

    def overrides(self, root: Path) -> list[str]:
        modality = CORPUS[self.arch].modality
        observe = ["runtime.observe=tap"] if self.backend.startswith("executorch") else []
        return [
            f"model=hf_{modality}",
            f"model.kwargs.arch={self.arch}",
            f"backend={self.backend}",
            f"backend.precision={self.precision}",
            *observe,
            "tracking=none",
            "runtime.iterations=2",
            f"cache_dir={root / 'cache'}",
            f"hydra.run.dir={root / self.label}",
        ]

    @property
    def label(self) -> str:
        return f"{self.arch}-{self.precision}-{self.backend}"


def _rows(run_dir: Path) -> int:
    gap_file = run_dir / "numeric_gap.csv"
    if not gap_file.is_file():
        return 0
    csv.field_size_limit(1 << 30)  # a large partition's row (this process only)
    with gap_file.open() as fh:
        return sum(1 for _ in csv.DictReader(fh))


def _delegated_ops(lowering: dict[str, Any]) -> int:
    """Ops the backend computes: ExecuTorch's lowering lists them; the emulated one per partition."""
    listed = lowering.get("delegated_ops")
    if isinstance(listed, list):
        return len(listed)
    return sum(len(p.get("ops", [])) for p in lowering.get("partitions", []))


def _number(value: Any) -> float | None:
    """A strict-JSON number ('inf', 'nan' as strings) as a float; None if there is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _accuracy(summary: dict[str, Any]) -> tuple[float | None, float | None]:
    outputs = (summary.get("accuracy") or {}).get("outputs") or []
    if not outputs:
        return None, None
    snr = [v for v in (_number(o.get("snr_db")) for o in outputs) if v is not None]
    top1 = [o["top1_agreement"] for o in outputs if o.get("top1_agreement") is not None]
    return (min(snr) if snr else None), (min(top1) if top1 else None)


def _run_facts(run_dir: Path) -> dict[str, Any]:
    """What a run dir says: lowered, verdict, rows per delegated op, accuracy, first divergence."""
    lowering_file, summary_file = run_dir / "lowering.json", run_dir / "summary.json"
    lowering = json.loads(lowering_file.read_text()) if lowering_file.is_file() else {}
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    delegated = _delegated_ops(lowering)
    rows = _rows(run_dir)
    snr, top1 = _accuracy(summary)
    first = summary.get("first_divergence") or {}
    instrumentation = summary.get("instrumentation") or {}
    return {
        "lowered": bool(lowering.get("partitions")),
        "verdict": summary.get("verdict", "none"),
        "verdict_reason": summary.get("verdict_reason", ""),
        "rows": rows,
        "delegated_ops": delegated,
        "rows_per_delegated_op": round(rows / delegated, 3) if delegated else None,
        "tap_ops_with_rows": instrumentation.get("ops_with_rows"),
        "snr_db": None if snr is None else round(snr, 2),
        "top1_agreement": top1,
        "first_divergence": "+".join(first.get("op_names", [])),
    }


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.lower().startswith("error")]
    return (lines or [line for line in stderr.splitlines() if line.strip()][-1:] or [""])[-1]


def run_job(job: Job, root: Path, threads: int) -> dict[str, Any]:
    """One CLI run in its own process; its facts, exit code and wall seconds."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
    command = [sys.executable, "-m", "pipeline", *job.overrides(root)]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        code, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        code, stderr = -1, f"error: timed out after {TIMEOUT_S} s"
    row: dict[str, Any] = {"arch": job.arch, "precision": job.precision, "backend": job.backend}
    row |= {"exit_code": code, "seconds": round(time.perf_counter() - started, 1)}
    row |= _run_facts(root / job.label)
    if code not in (0, 3, 4, 5):
        row["error"] = _error_line(stderr)
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table RESULTS.md holds: one line per run."""
    head = (
        "| model | precision | backend | lowered | verdict | exit | rows / delegated ops "
        "| SNR dB | top-1 | s |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        verdict = r["verdict"] if "error" not in r else f"error: {r['error'][:80]}"
        lines.append(
            f"| {r['arch']} | {r['precision']} | {r['backend']} | {'yes' if r['lowered'] else 'no'}"
            f" | {verdict} | {r['exit_code']} | {r['rows']} / {r['delegated_ops']}"
            f" | {r['snr_db']} | {r['top1_agreement']} | {r['seconds']} |"
        )
    return "\n".join(lines)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(CORPUS), choices=list(CORPUS))
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--jobs", type=int, default=1, choices=range(1, CORES + 1))
    parser.add_argument(
        "--out", type=Path, default=None, help="rows as JSON; runs it holds already are kept"
    )
    parser.add_argument("--root", type=Path, default=None, help="run dirs and cache (temp dir)")
    return parser.parse_args()


def _done(out: Path | None) -> list[dict[str, Any]]:
    """The rows an earlier (interrupted) run wrote to --out, so a long run can resume."""
    if out is None or not out.is_file():
        return []
    return list(json.loads(out.read_text()))


def main() -> int:
    args = _parse()
    root = args.root or Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    rows = _done(args.out)
    done = {(r["arch"], r["precision"], r["backend"]) for r in rows}
    jobs = [
        Job(m, p, b)
        for p in args.precisions
        for b in args.backends
        for m in args.models
        if (m, p, b) not in done
    ]
    threads = CORES // args.jobs
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for row in pool.map(lambda job: run_job(job, root, threads), jobs):
            print(json.dumps(row), flush=True)
            rows.append(row)
            if args.out is not None:  # each row kept as it comes: a long run can be read early
                write_text_atomic(args.out, json.dumps(rows, indent=2))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
