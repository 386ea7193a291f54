"""Fault finding over the zoo (issue 14.5): does the verdict name the op a single fault broke?

    python benchmarks/bench_fault_finding.py              # tiny zoo configs, every model
    python benchmarks/bench_fault_finding.py --limit 20   # the first 20 faults only
    python benchmarks/bench_fault_finding.py --observe bisect --models mlp \
        --backends executorch_xnnpack,qnn                 # runtime.observe=bisect (below)

First the clean runs (every tiny zoo model × xnnpack, qnn × fp32, fp16, int8, and portable fp32):
false alarms, and the lowest clean local SNR per precision (what thresholds must stay under).
Then a generated suite of single faults: for each model its first, middle and last compared op
(names from the clean run, so fused kernels are hit through one of their ops), every op of the
cond branch that ran, the cond itself and topk (two outputs); each target gets every fault kind
(scale by 1.1, i.e. a 10% error; offset; nan; transpose), and the backend and precision rotate
over the suite. Each fault is counted as exact (first divergence is that op), fused-group (a
kernel holding it), wrong, missed, no-op (the lower stage or analysis warned that the fault
changes nothing) or crashed. Outcomes are counted, not timed.

`--observe bisect`: per model, backend and precision, a clean run and a fault (scale 1.5) on the
middle op of the exported program, with runtime.observe=bisect and nothing logged inside
partitions (emulated backends: runtime.debug_level=program_outputs; ExecuTorch's XNNPACK logs
only its calls' outputs, and nothing at fp16). Counts false alarms, faults named by bisection
(exact, or the fused kernel) and the lowerings each took.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline_runs import run_in  # benchmarks/

from tests.helpers.configs import TINY_MODEL_OVERRIDES, ZOO_MODELS

PRECISIONS = ("fp32", "fp16", "int8")
BACKENDS = ("xnnpack", "qnn", "portable")
KINDS = ("scale", "offset", "nan", "transpose")
KIND_VALUE = {"scale": 1.1}  # a 10% scale error; the other kinds keep their default value


def _run(root: Path, label: str, overrides: list[str]) -> Path:
    return run_in(root, label, overrides)


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    import csv

    with (run_dir / "numeric_gap.csv").open() as fh:
        return list(csv.DictReader(fh))


def _lowest_local_snr(rows: list[dict[str, Any]]) -> float:
    values = [
        float(r.get("local_snr") or r["snr"])
        for r in rows
        if r["status"] == "ok" and r.get("comparison") == "float" and r.get("snr")
        if not r.get("follows_flipped_branch")
    ]
    return min(values, default=math.inf)


def clean_runs(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Clean runs; prints false alarms and the lowest local SNR per precision and backend."""
    rows_by_model: dict[str, list[dict[str, Any]]] = {}
    lowest: dict[tuple[str, str], float] = {}
    alarms = 0
    runs = [(m, b, p) for m in ZOO_MODELS for b in BACKENDS for p in PRECISIONS]
    runs = [r for r in runs if r[1] != "portable" or r[2] == "fp32"]
    for model, backend, precision in runs:
        label = f"clean-{model}-{backend}-{precision}"
        overrides = [*TINY_MODEL_OVERRIDES[model], f"backend={backend}"]
        run_dir = _run(root, label, [*overrides, f"backend.precision={precision}"])
        summary, rows = _summary(run_dir), _rows(run_dir)
        if backend == "xnnpack" and precision == "fp32":
            rows_by_model[model] = rows
        alarms += summary["verdict"] != "pass"
        low = _lowest_local_snr(rows)
        lowest[(precision, backend)] = min(lowest.get((precision, backend), math.inf), low)
        print(f"{label}: {summary['verdict']} lowest local snr {low:.1f}", flush=True)
    print(f"clean runs: {len(runs)}, false alarms: {alarms}")
    for (precision, backend), low in sorted(lowest.items()):
        print(f"  lowest clean local snr {precision} {backend}: {low:.1f} dB")
    return rows_by_model


def targets(model: str, rows: list[dict[str, Any]]) -> list[str]:
    """First, middle and last compared op; cond branch ops and the cond; topk."""
    compared = [json.loads(r["op_names"]) for r in rows if r["status"] == "ok" and r["op_names"]]
    names = [compared[0][0], compared[len(compared) // 2][-1], compared[-1][-1]]
    if model == "cond_model":
        names += [
            n for ops in compared for n in ops if n in ("relu", "mul", "sigmoid", "sub", "cond")
        ]
    if model == "topk_model":
        names.append("topk")
    return list(dict.fromkeys(names))


def classify(summary: dict[str, Any], target: str) -> str:
    first = summary["first_divergence"]
    if summary["verdict"] == "pass":
        noop = any("changes nothing" in w or "changed nothing" in w for w in summary["warnings"])
        return "no-op" if noop else "missed"
    if first is None:
        return "wrong"
    if first["op_names"] == [target]:
        return "exact"
    return "fused-group" if target in first["op_names"] else "wrong"


def main(limit: int | None) -> int:
    root = Path(tempfile.mkdtemp(prefix="bench_faults_"))
    rows_by_model = clean_runs(root)
    suite = [
        (model, target, kind)
        for model in ZOO_MODELS
        for target in targets(model, rows_by_model[model])
        for kind in KINDS
    ]
    outcomes: Counter[str] = Counter()
    for i, (model, target, kind) in enumerate(suite[:limit]):
        backend, precision = BACKENDS[i % 3], PRECISIONS[(i // 3) % 3]
        label = f"fault{i}-{model}-{target}-{kind}-{backend}-{precision}"
        overrides = [
            *TINY_MODEL_OVERRIDES[model],
            f"backend={backend}",
            f"backend.precision={precision}",
            f"backend.fault.node={target}",
            f"backend.fault.kind={kind}",
            *([f"backend.fault.value={KIND_VALUE[kind]}"] if kind in KIND_VALUE else []),
        ]
        try:
            summary = _summary(_run(root, label, overrides))
            outcome = classify(summary, target)
            first = summary["first_divergence"]
            named = first["op_names"] if first else summary["verdict_reason"]
        except Exception as exc:  # a crash is an outcome to count, with its message
            outcome, named = "crashed", f"{type(exc).__name__}: {exc}"
            traceback.print_exc(limit=1)
        outcomes[outcome] += 1
        print(f"{label}: {outcome} ({named})", flush=True)
    total = sum(outcomes.values())
    print(f"faults: {total}; " + ", ".join(f"{k} {outcomes[k]}" for k in sorted(outcomes)))
    return 0


def _middle_op(run_dir: Path) -> str:
    """The middle top-level op of the run's exported program (a fault target inside it)."""
    from stages.export.subgraph_cut import cut_ops
    from stages.handover.exported_program import load_exported_program

    ops = cut_ops(load_exported_program(run_dir / "exported.pt2"))
    return ops[len(ops) // 2].name


def _bisect_outcome(summary: dict[str, Any], target: str | None) -> str:
    """clean: pass / not_evaluated, or a false alarm; faulted: exact, fused-group, wrong, missed."""
    first = summary["first_divergence"]
    if target is None:
        return "false-alarm" if summary["verdict"] == "fail" else "clean"
    if first is None:
        return "missed"
    if first.get("op", first["op_names"][0] if len(first["op_names"]) == 1 else None) == target:
        return "exact"
    return "fused-group" if target in first["op_names"] and not first.get("op") else "wrong"


def bisect_suite(models: list[str], backends: list[str], limit: int | None) -> int:
    """Clean and faulted runs under runtime.observe=bisect; outcomes and lowerings printed."""
    root = Path(tempfile.mkdtemp(prefix="bench_bisect_"))
    outcomes: Counter[str] = Counter()
    runs = [(m, b, p) for m in models for b in backends for p in PRECISIONS]
    for model, backend, precision in runs[:limit]:
        base = [
            *TINY_MODEL_OVERRIDES[model],
            f"backend={backend}",
            f"backend.precision={precision}",
        ]
        base += ["runtime.observe=bisect", "analyze.fail_exit_code=false"]
        if not backend.startswith("executorch_"):
            base.append("runtime.debug_level=program_outputs")
        label = f"{model}-{backend}-{precision}"
        try:
            clean_dir = _run(root, f"clean-{label}", base)
            target = _middle_op(clean_dir)
            fault = [f"backend.fault.node={target}", "backend.fault.value=1.5"]
            for name, run_dir, aimed in (
                ("clean", clean_dir, None),
                ("fault", _run(root, f"fault-{label}", [*base, *fault]), target),
            ):
                summary = _summary(run_dir)
                outcome = _bisect_outcome(summary, aimed)
                bisection = summary.get("bisection") or {}
                outcomes[outcome] += 1
                print(
                    f"{label} {name}{f' on {aimed}' if aimed else ''}: {outcome} "
                    f"(verdict {summary['verdict']}, bisection op {bisection.get('op')}, "
                    f"{bisection.get('lowerings', 0)} lowerings, "
                    f"{bisection.get('lowerings_reused', 0)} reused)",
                    flush=True,
                )
        except Exception as exc:  # a crash is an outcome to count
            outcomes["crashed"] += 1
            print(f"{label}: crashed ({type(exc).__name__}: {exc})", flush=True)
            traceback.print_exc(limit=1)
    print("bisect: " + ", ".join(f"{k} {outcomes[k]}" for k in sorted(outcomes)))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, help="run only the first LIMIT faults (runs)")
    parser.add_argument("--observe", choices=("off", "bisect"), default="off")
    parser.add_argument("--models", default="mlp", help="bisect: comma-separated tiny zoo models")
    parser.add_argument("--backends", default="qnn", help="bisect: comma-separated backends")
    args = parser.parse_args()
    if args.observe == "bisect":
        sys.exit(bisect_suite(args.models.split(","), args.backends.split(","), args.limit))
    sys.exit(main(args.limit))
