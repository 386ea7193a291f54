"""ExecuTorch's real XNNPACK at fp32, int8 and fp16 (issue 34): per model and precision, a clean
run and a run with one fault in the middle of an XNNPACK partition.

    PYTHONPATH=. python benchmarks/bench_executorch_precision.py                     # tiny zoo
    PYTHONPATH=. python benchmarks/bench_executorch_precision.py --models mlp --precisions int8
    PYTHONPATH=. python benchmarks/bench_executorch_precision.py --full              # full zoo sizes

Models: the zoo's mlp, ViT and MobileNetV2, and Hugging Face's BERT and ViT (`hf_bert`, `hf_vit`:
tiny configs of stages.export.zoo.hf, random weights, nothing downloaded).

Per run: the verdict, numeric rows and the ops XNNPACK ran (rows per delegated op: one row per
partition, as ExecuTorch's XNNPACK logs only its calls' outputs), stage seconds and the peak
RSS of this process (max over the runs so far: a run's own cost is its increase, if any). The
fault run targets the middle op of the largest partition of the clean run and counts as found
when the first divergence holds that op. `--observe off tap` adds, per model and precision,
the runs with `runtime.observe=tap`: rows per op XNNPACK computes (summary.json
`instrumentation`), whether instrumentation changed what ran (and which ops' fusions), refused
taps, and its cost against the plain run of the same model and precision (lower and run
seconds, peak RSS). Each model/precision/observe runs in a child process of its own, so its
peak RSS is its own.

    PYTHONPATH=. python benchmarks/bench_executorch_precision.py --models mlp --precisions int8 \
        --observe off tap --no-fault                                    # smallest settings
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.safe_io.atomic_write import write_text_atomic
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config

MODELS = ("mlp", "vit", "mobilenet_v2", "hf_bert", "hf_vit")
PRECISIONS = ("fp32", "int8", "fp16")
OBSERVE = ("off", "tap")
VIT_2_BLOCKS = ["model=vit", "model.kwargs.depth=2"]


def _hf_overrides(arch: str) -> list[str]:
    """A Hugging Face architecture's tiny config, random weights (stages.export.zoo.hf)."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded
    from stages.export.zoo.hf import ARCHITECTURES

    return [
        "model=custom",
        "model._target_=stages.export.zoo.hf.make",
        f"model.kwargs.arch={arch}",
        f"model.inputs={ARCHITECTURES[arch].example_inputs}",
    ]


def _model_overrides(model: str, full: bool) -> list[str]:
    if model.startswith("hf_"):
        return _hf_overrides(model.removeprefix("hf_"))
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


def _instrumentation(summary: dict[str, Any]) -> dict[str, Any]:
    """The tap run's rows per op and what instrumentation changed (empty for a plain run)."""
    record = summary.get("instrumentation") or {}
    if not record:
        return {}
    return {
        "ops_with_rows": record.get("ops_with_rows"),
        "ops_xnnpack_computes": record.get("ops_delegated"),
        "rows_per_op": record.get("rows_per_op"),
        "changed_what_ran": record.get("changed_what_ran"),
        "fusion_changed_ops": record.get("fusion_changed_ops"),
        "copies_added": record.get("copies_added"),
        "refused_taps": len(record.get("refused") or []),
        "final_outputs_bit_equal": (record.get("final_outputs") or {}).get("bit_equal"),
    }


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
        **_instrumentation(summary),
    }


def _one(
    root: Path, model: str, precision: str, full: bool, observe: str = "off", fault: bool = True
) -> list[dict[str, Any]]:
    base = [
        *_model_overrides(model, full),
        f"backend.precision={precision}",
        f"runtime.observe={observe}",
    ]
    label = f"{model}-{precision}-{observe}"
    clean_dir, seconds = _run(root, label, base)
    out: list[dict[str, Any]] = [
        {"model": model, "precision": precision, "observe": observe, "fault": "", "found": ""}
    ]
    out[0] |= _facts(clean_dir, seconds)
    target = _middle_op(clean_dir) if (clean_dir / "numeric_gap.csv").is_file() else None
    if target is None or not fault:
        return out
    fault_dir, seconds = _run(root, f"{label}-fault", [*base, f"backend.fault.node={target}"])
    facts = _facts(fault_dir, seconds)
    summary = json.loads((fault_dir / "summary.json").read_text())
    first = summary.get("first_divergence") or {}
    found = target in first.get("fault_nodes", [])
    out.append({"model": model, "precision": precision, "observe": observe, "fault": target})
    out[-1] |= {"found": found, **facts}
    return out


def _child(model: str, precision: str, observe: str, args: argparse.Namespace) -> list[Any]:
    """One model/precision/observe in a child process (its own peak RSS); its rows."""
    command = [sys.executable, __file__, "--child", model, precision, observe]
    command += ["--full"] * args.full + ["--no-fault"] * (not args.fault)
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0:  # a model that cannot run is a row of the table, not the end of it
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        failed = {"model": model, "precision": precision, "observe": observe, "fault": ""}
        rows.append(failed | {"error": (errors or ["exit code " + str(done.returncode)])[-1]})
    return rows


def _with_cost(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tap row's cost against the plain row of its model, precision and fault."""
    plain = {
        (r["model"], r["precision"], r["fault"]): r
        for r in rows
        if r["observe"] == "off" and "error" not in r
    }
    for row in rows:
        base = plain.get((row["model"], row["precision"], row["fault"]))
        if row["observe"] == "off" or base is None or "error" in row:
            continue
        for key in ("lower_s", "run_s", "peak_rss_mib"):
            row[f"{key}_vs_plain"] = round(row[key] - base[key], 2)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--observe", nargs="+", default=["off", "tap"], choices=OBSERVE)
    parser.add_argument("--full", action="store_true", help="zoo sizes (ViT with 2 blocks)")
    parser.add_argument("--no-fault", dest="fault", action="store_false", help="clean runs only")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "PRECISION", "OBSERVE"))
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory(prefix="bench-et-precision-") as tmp:
            model, precision, observe = args.child
            for row in _one(Path(tmp), model, precision, args.full, observe, args.fault):
                print(json.dumps(row), flush=True)
        return 0
    results: list[dict[str, Any]] = []
    for model in args.models:
        for precision in args.precisions:
            for observe in args.observe:
                results += _child(model, precision, observe, args)
    for row in _with_cost(results):
        print(json.dumps(row), flush=True)
    if args.out is not None:
        write_text_atomic(args.out, json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
