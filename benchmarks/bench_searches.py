"""The searches measured (issue 36.4): per case, the trials a search took, its wall time against
one cold run of the same model, the cost of a trial after the first (median wall clock of trials
2.. as the search timed them, which reuse the export) against that cold run, whether its result
holds when re-run in a fresh directory, and the reduce's op count. Each command is a new CLI
process in a fresh working directory (own MLflow store and stage cache; both the cold run and the
search log to MLflow, as by default).

    python benchmarks/bench_searches.py [--cases demo,conv,deep,vit,executorch] [--kinds precision,delegation,reduce]
        [--max-trials 40]            # smallest: --cases demo --kinds delegation --max-trials 4
    python benchmarks/bench_searches.py --cases deep --max-trials 30   # issue 44.6

Cases: demo (zoo: outlier_mlp int8 precision; mlp fault delegation and reduce), conv (unseen, in
benchmarks/search_models.py: a conv net with an outlier channel, int8 precision; the same net with
a fault on its second conv, delegation and reduce), deep (zoo: deep_outlier_mlp, 122 ops, int8
precision; target: a set of <= 5% of its ops within 30 trials), vit (zoo: ViT int8 precision; a
fault on matmul_3 at fp16, delegation and reduce; target: a trial costs <= 1/3 of a cold run),
executorch (the demo's models on ExecuTorch's own XNNPACK delegate). Timings are wall clock on
whatever else the machine runs: the load average is printed. Trial counts are deterministic.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
CONV = [
    "model=custom",
    f"model._target_={REPO / 'benchmarks' / 'search_models.py'}:build_conv_outlier",
    "model.inputs=[{shape:[4,3,16,16]}]",
]
CONV_FAULT = ["backend.fault.node=conv2d_1", "backend.fault.kind=scale"]
CASES: dict[str, list[tuple[str, list[str]]]] = {
    "demo": [
        ("precision", ["model=outlier_mlp", "backend=xnnpack", "backend.precision=int8"]),
        ("delegation", ["model=mlp", "backend=xnnpack", "backend.fault.node=linear_1"]),
        ("reduce", ["model=mlp", "backend=xnnpack", "backend.fault.node=linear_1"]),
    ],
    "conv": [
        ("precision", [*CONV, "backend=xnnpack", "backend.precision=int8"]),
        ("delegation", [*CONV, "model.kwargs.outlier=1.0", "backend=qnn", *CONV_FAULT]),
        ("reduce", [*CONV, "model.kwargs.outlier=1.0", "backend=qnn", *CONV_FAULT]),
    ],
    "deep": [
        ("precision", ["model=deep_outlier_mlp", "backend=xnnpack", "backend.precision=int8"]),
    ],
    "vit": [
        ("precision", ["model=vit", "backend=xnnpack", "backend.precision=int8"]),
        ("delegation", ["model=vit", "backend=qnn", "backend.fault.node=matmul_3"]),
        ("reduce", ["model=vit", "backend=qnn", "backend.fault.node=matmul_3"]),
    ],
    "executorch": [
        (
            "precision",
            ["model=outlier_mlp", "backend=executorch_xnnpack", "backend.precision=int8"],
        ),
        ("delegation", ["model=mlp", "backend=executorch_xnnpack", "backend.fault.node=linear_1"]),
        ("reduce", ["model=mlp", "backend=executorch_xnnpack", "backend.fault.node=linear_1"]),
    ],
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cli(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=7200,
    )
    return time.perf_counter() - started, result


def _holds(kind: str, found: dict, args: list[str], cwd: Path) -> bool:
    """Re-run the result in a fresh directory: the budget met, the verdict passes, or the
    reduce's command FAILs with the same first-divergence op type."""
    if found.get("result") is None:
        return False
    if kind == "reduce":
        command = shlex.split(found["command"])[3:]
        _, result = _cli([*command, "tracking=none", f"cache_dir={cwd / 'holds'}"], cwd)
        summary = json.loads((Path(found["program"]).parent / "summary.json").read_text())
        same = summary["first_divergence"]["op_types"] == found["first_divergence_op_types"]
        return result.returncode == 3 and same
    overrides = [f"{k}=[{','.join(v)}]" for k, v in found["result"].items()]
    run_dir = cwd / "holds"
    _cli([*args, *overrides, "tracking=none", "cache=false", f"hydra.run.dir={run_dir}"], cwd)
    summary = json.loads((run_dir / "summary.json").read_text())
    if kind == "precision":
        return summary["accuracy"]["met"] is True
    return summary["verdict"] == "pass"


def later_trial_seconds(found: dict) -> float | None:
    """Median wall clock of the trials after the first (they reuse its export), as timed by the
    search (search.json's trial_log); the proving re-run (cache=false, cold) left out. None when
    there is no such trial."""
    seconds = sorted(
        t["seconds"]
        for t in found.get("trial_log", [])[1:]
        if t.get("seconds") is not None and "cache=false" not in t["overrides"]
    )
    return round(seconds[len(seconds) // 2], 2) if seconds else None


def _ratio(part: float | None, whole: float) -> float | None:
    return None if part is None else round(part / whole, 3)


def _result_ops(found: dict) -> int | None:
    """How many ops the result names (keep_float / keep_off), or the reduce's program size."""
    if found.get("ops") is not None:
        return int(found["ops"])
    lists = [v for v in (found.get("result") or {}).values() if isinstance(v, list)]
    return sum(len(v) for v in lists) if lists else None


def _baseline_ops(found: dict) -> int | None:
    """How many ops the baseline (the first trial) delegated: what a precision search chooses
    from."""
    log = found.get("trial_log") or []
    return len(set(log[0].get("delegated_ops", []))) if log else None


def _budget_db(sweep: Path) -> float | None:
    """The accuracy budget the search held trials to (the sweep's composed config)."""
    path = sweep / "multirun.yaml"
    if not path.is_file():
        return None
    return float(OmegaConf.load(path).analyze.accuracy_budget.snr_db)


def measure(kind: str, args: list[str], max_trials: int) -> dict:
    """One search and one cold run of the same model, each in its own fresh directory."""
    with tempfile.TemporaryDirectory(prefix="bench_search_") as tmp:
        work = Path(tmp)
        cold_s, _ = _cli(
            [
                *args,
                f"hydra.run.dir={work / 'cold'}",
                f"cache_dir={work / 'cold_cache'}",
            ],
            work,
        )
        search_s, result = _cli(
            [
                "-m",
                f"search={kind}",
                *args,
                f"search.max_trials={max_trials}",
                f"hydra.sweep.dir={work / 'sweep'}",
                f"cache_dir={work / 'cache'}",
            ],
            work,
        )
        path = work / "sweep" / "search.json"
        if not path.is_file():
            raise SystemExit(f"search={kind} {args} wrote no search.json:\n{result.stderr[-3000:]}")
        found = json.loads(path.read_text())
        return {
            "kind": kind,
            "args": " ".join(args),
            "exit": result.returncode,
            "trials": found["trials"],
            "result": found["result"],
            "ops": found.get("ops"),
            "search_s": round(search_s, 1),
            "cold_run_s": round(cold_s, 1),
            "per_trial_over_cold": round(search_s / max(found["trials"], 1) / cold_s, 3),
            "later_trial_s": later_trial_seconds(found),
            "later_trial_over_cold": _ratio(later_trial_seconds(found), cold_s),
            "result_ops": _result_ops(found),
            "delegated_ops": _baseline_ops(found),
            "budget_db": _budget_db(work / "sweep"),
            "ranked_by": found.get("ranked_by"),
            "verified_snr_db": (found.get("verified") or {}).get("min_snr_db"),
            "holds": _holds(kind, found, args, work),
            # search.max_trials ran out: the smallest set a trial proved (not shown minimal)
            "best_so_far": (found.get("best_so_far") or {}).get("overrides"),
            "message": found.get("message", ""),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="demo", help=f"comma-separated: {','.join(CASES)}")
    parser.add_argument("--kinds", default="precision,delegation,reduce", help="searches to run")
    parser.add_argument("--max-trials", type=int, default=40)
    options = parser.parse_args()
    for case in options.cases.split(","):
        for kind, args in CASES[case]:
            if kind not in options.kinds.split(","):
                continue
            before = load_average()
            row = measure(kind, args, options.max_trials)
            print(
                json.dumps({**row, "load_before": before, "load_after": load_average()}), flush=True
            )


if __name__ == "__main__":
    main()
