"""Per-op statistics across samples (issue 45.4): does judging each op over M samples catch a
small systematic kernel error that one sample misses, without false alarms on clean runs?

    PYTHONPATH=. python benchmarks/bench_sample_statistics.py                  # the table
    PYTHONPATH=. python benchmarks/bench_sample_statistics.py --models vit --counts 64
    PYTHONPATH=. python benchmarks/bench_sample_statistics.py --models hf_vision:convnext \
        --counts 64 --clean-only                                  # a corpus architecture

For each model, backend and precision: a clean run, then a scale fault on a linear and on a
matmul (0.3% at fp16, 1% at int8: `backend.fault.kind=scale backend.fault.value=1.003`), each
with `inputs.count` 1 and 64. A clean run's line gives its verdict, and over its float rows the
largest systematic excess (dB over the allowed error, the statistic the verdict bounds at
SYSTEMATIC_BOUND_DB) and the largest |t| of a significant coefficient; a fault's line gives the
verdict, whether the first divergence is the faulted op, and the faulted row's figures.
Outcomes are counted, not timed.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipeline_runs import run_in  # benchmarks/

from tests.helpers.configs import TINY_MODEL_OVERRIDES

# Model → (zoo overrides, a linear op, a matmul op) of its exported program.
MODELS: dict[str, tuple[list[str], str, str]] = {
    "vit": (TINY_MODEL_OVERRIDES["vit"], "linear_4", "matmul_1"),
    "llm": (TINY_MODEL_OVERRIDES["llm"], "linear_3", "matmul_1"),
    # BERT attends through scaled_dot_product_attention: no matmul op, a second linear instead
    "hf_bert": (["model=hf_text", "model.kwargs.arch=bert"], "linear_3", "linear_5"),
}
FACTOR = {"fp16": 1.003, "int8": 1.01}
CASES = (("xnnpack", "fp16"), ("qnn", "int8"), ("xnnpack", "int8"), ("qnn", "fp16"))


def _run(root: Path, label: str, overrides: list[str]) -> Path:
    return run_in(root, label, overrides)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    with (run_dir / "numeric_gap.csv").open() as fh:
        return [r for r in csv.DictReader(fh) if r.get("comparison") == "float"]


def _clean_line(run_dir: Path) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = _rows(run_dir)
    systematic = max((_float(r.get("systematic_excess_db")) for r in rows), default=-math.inf)
    biased = [r for r in rows if r.get("runtime_more_biased") == "True"]
    blamed = max((_float(r.get("systematic_excess_db")) for r in biased), default=-math.inf)
    excess = max((_float(r.get("excess_db")) for r in rows), default=-math.inf)
    worst = max((_float(r.get("excess_worst_db")) for r in rows), default=-math.inf)
    flagged = sum(r.get("systematic") == "True" for r in rows)
    return (
        f"{summary['verdict']:<14} rows {len(rows):>3}  max excess {excess:7.2f} dB  worst-sample "
        f"excess {worst:7.2f} dB  max systematic {systematic:7.2f} dB (runtime more biased "
        f"{blamed:7.2f} dB)  systematic rows {flagged}"
    )


def _fault_line(run_dir: Path, node: str) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    first = summary.get("first_divergence") or {}
    named = node in (first.get("op_names") or [])
    row = next((r for r in _rows(run_dir) if node in r.get("fault_nodes", "")), {})
    return (
        f"{summary['verdict']:<14} named {named!s:<5}  excess {_float(row.get('excess_db')):7.2f} "
        f"dB  systematic {_float(row.get('systematic_excess_db')):7.2f} dB  scale "
        f"{_float(row.get('scale_error')):+.5f} (t {_float(row.get('scale_error_t')):.1f})  "
        f"runtime more biased {row.get('runtime_more_biased')}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--counts", default="1,64")
    parser.add_argument("--cases", default=",".join(f"{b}:{p}" for b, p in CASES))
    parser.add_argument("--clean-only", action="store_true", help="no fault runs")
    parser.add_argument("--faults-only", action="store_true", help="no clean runs")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_sample_statistics_"))
    for model in args.models.split(","):
        if model in MODELS:
            overrides, linear, matmul = MODELS[model]
        else:  # a corpus architecture, `hf_vision:convnext`: clean runs only
            group, arch = model.split(":")
            overrides, linear, matmul = [f"model={group}", f"model.kwargs.arch={arch}"], "", ""
        for case in args.cases.split(","):
            backend, precision = case.split(":")
            for count in (int(c) for c in args.counts.split(",")):
                base = [*overrides, f"backend={backend}", f"backend.precision={precision}"]
                base.append(f"inputs.count={count}")
                if backend.startswith("executorch"):  # values inside its XNNPACK partitions
                    base.append("runtime.observe=tap")
                label = f"{model}-{backend}-{precision}-{count}"
                try:
                    if not args.faults_only:
                        clean = _clean_line(_run(root, label, base))
                        print(f"{label:<28} clean  {clean}", flush=True)
                    for node in () if args.clean_only or not linear else (linear, matmul):
                        fault = [
                            f"backend.fault.node={node}",
                            "backend.fault.kind=scale",
                            f"backend.fault.value={FACTOR[precision]}",
                        ]
                        run = _run(root, f"{label}-{node}", [*base, *fault])
                        print(f"{label:<28} {node:<9} {_fault_line(run, node)}", flush=True)
                except Exception as exc:  # one case's failure is a line of the table
                    print(f"{label:<28} crashed: {type(exc).__name__}: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
