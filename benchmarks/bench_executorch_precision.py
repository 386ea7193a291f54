"""ExecuTorch's real XNNPACK at fp32, int8 and fp16 (issue 34): per model and precision, a clean
run and a run with one fault in the middle of an XNNPACK partition.

    PYTHONPATH=. python benchmarks/bench_executorch_precision.py                     # tiny zoo
    PYTHONPATH=. python benchmarks/bench_executorch_precision.py --models mlp --precisions int8
    PYTHONPATH=. python benchmarks/bench_executorch_precision.py --full              # full zoo sizes

Per run: the verdict, numeric rows and the ops XNNPACK ran (rows per delegated op: one row per
partition, as ExecuTorch's XNNPACK logs only its calls' outputs), stage seconds and the peak
RSS of this process (max over the runs so far: a run's own cost is its increase, if any). The
fault run targets the middle op of the largest partition of the clean run and counts as found
when the first divergence holds that op. Only the plain run exists (`observe` column):
instrumentation and bisection are not implemented, so their cost and fusion columns are absent.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.safe_io.atomic_write import write_text_atomic
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config

MODELS = ("mlp", "vit", "mobilenet_v2")
PRECISIONS = ("fp32", "int8", "fp16")
VIT_2_BLOCKS = ["model=vit", "model.kwargs.depth=2"]


def _model_overrides(model: str, full: bool) -> list[str]:
    if full:
        return VIT_2_BLOCKS if model == "vit" else [f"model={model}"]
    return list(TINY_MODEL_OVERRIDES[model])


def _run(root: Path, label: str, overrides: list[str]) -> tuple[Path, dict[str, float]]:
    cfg = compose_config(
        root / label,
        [
            *overrides,
            "backend=executorch_xnnpack",
            "tracking=none",
            "runtime.iterations=3",
            "analyze.fail_exit_code=false",
            f"cache_dir={root / 'cache'}",
        ],
    )
    with open_dict(cfg):
        cfg.run_dir = str(root / label / "run")
    result = run_pipeline(cfg, print_summary=False)
    return Path(cfg.run_dir), {s.name: s.seconds for s in result.stages}


def _middle_op(run_dir: Path) -> str | None:
    """The middle op of the largest XNNPACK partition's row of a clean run."""
    with (run_dir / "numeric_gap.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["delegate_backend_name"]]
    if not rows:
        return None
    ops = max((json.loads(r["op_names"]) for r in rows), key=len)
    return str(ops[len(ops) // 2])


def _facts(run_dir: Path, seconds: dict[str, float]) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text())
    gap_file = run_dir / "numeric_gap.csv"
    rows = list(csv.DictReader(gap_file.open())) if gap_file.is_file() else []
    lowering = json.loads((run_dir / "lowering.json").read_text())
    delegated = len(lowering.get("delegated_handles", []))
    first = summary.get("first_divergence") or {}
    return {
        "verdict": summary["verdict"],
        "rows": len(rows),
        "delegated_handles": delegated,
        "rows_per_delegated_op": round(len(rows) / delegated, 3) if delegated else None,
        "partitions": summary.get("partitions"),
        "first_divergence": "+".join(first.get("op_names", [])),
        "lower_s": round(seconds.get("lower", 0.0), 2),
        "run_s": round(seconds.get("run", 0.0), 2),
        "analyze_s": round(seconds.get("analyze", 0.0), 2),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def _one(root: Path, model: str, precision: str, full: bool) -> list[dict[str, Any]]:
    base = [*_model_overrides(model, full), f"backend.precision={precision}"]
    label = f"{model}-{precision}"
    clean_dir, seconds = _run(root, label, base)
    out = [{"model": model, "precision": precision, "observe": "plain", "fault": "", "found": ""}]
    out[0] |= _facts(clean_dir, seconds)
    target = _middle_op(clean_dir) if (clean_dir / "numeric_gap.csv").is_file() else None
    if target is None:
        return out
    fault_dir, seconds = _run(root, f"{label}-fault", [*base, f"backend.fault.node={target}"])
    facts = _facts(fault_dir, seconds)
    summary = json.loads((fault_dir / "summary.json").read_text())
    first = summary.get("first_divergence") or {}
    found = target in first.get("fault_nodes", [])
    out.append({"model": model, "precision": precision, "observe": "plain", "fault": target})
    out[-1] |= {"found": found, **facts}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--full", action="store_true", help="zoo sizes (ViT with 2 blocks)")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-et-precision-") as tmp:
        for model in args.models:
            for precision in args.precisions:
                for row in _one(Path(tmp), model, precision, args.full):
                    results.append(row)
                    print(json.dumps(row), flush=True)
    if args.out is not None:
        write_text_atomic(args.out, json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
