"""The whole loop as a user meets it, side by side with ExecuTorch's own loop (issue 10):

- cold `python -m pipeline model=vit backend=xnnpack` (fresh directory: new MLflow store, empty
  cache) vs `benchmarks/executorch_loop.py` (ExecuTorch's export -> lower -> run -> Inspector of
  the same model), alternated A B A B; target ours <= 1/3 of ExecuTorch's;
- the same command again in the same directory (every stage reused, so no duplicate MLflow run);
  target <= 1/5 of cold; then once more with tracking.log_unchanged=true (a new MLflow run);
- `python -m pipeline --help` and a config error; target <= 1 s each;
- with `--load`: each rep is a quiet segment then the same runs while two CPU-bound processes
  run, so both halves of a rep see the same machine (the host's drift cancels); target: our
  loaded/quiet ratio <= ExecuTorch's, judged rep by rep (the median over reps of ours ÷
  ExecuTorch's slow-down, and how many reps agree). A cold run with `tracking=none` in every
  segment is the control: it shows what MLflow's process (import, store creation) adds.

Every cold run starts a new sqlite MLflow store (MLflow creates and migrates it).

    PYTHONPATH=. python benchmarks/bench_cold_loop.py [--reps 3] [--load] [--quick-only]

`--quick-only` measures only `--help` and the config error (seconds, no ExecuTorch needed).

Whole-process wall times from time.perf_counter around each subprocess; medians are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ENV.pop("MLFLOW_TRACKING_URI", None)
OURS = [sys.executable, "-m", "pipeline", "model=vit", "backend=xnnpack"]
# a stage row of the run summary: name, status, seconds, then the torch thread count
STAGE_ROW = re.compile(
    r"^(export|lower|run|analyze)\s+(done|reused)\s+([\d.]+)(?:\s+\d+)?\s*$", re.M
)


def _timed(command: list[str], cwd: Path, env: dict[str, str] = ENV) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout + done.stderr


def _ours_cold(directory: Path) -> tuple[float, dict[str, float]]:
    """A cold run in `directory`: its wall time and the summary's stage seconds."""
    cold, out = _timed(OURS, directory)
    return cold, {m.group(1): float(m.group(3)) for m in STAGE_ROW.finditer(out)}


def _ours_cold_and_reused() -> tuple[float, float, float, dict[str, float]]:
    """Cold, unchanged re-run (no duplicate MLflow run), and a re-run that logs one anyway."""
    with tempfile.TemporaryDirectory(prefix="bench_cold_") as tmp:
        cold, stages = _ours_cold(Path(tmp))
        reused, _ = _timed(OURS, Path(tmp))
        logged, _ = _timed([*OURS, "tracking.log_unchanged=true"], Path(tmp))
    return cold, reused, logged, stages


def _ours_untracked() -> float:
    """The control: a cold run without MLflow tracking (no tracking process, no store)."""
    with tempfile.TemporaryDirectory(prefix="bench_untracked_") as tmp:
        return _timed([*OURS, "tracking=none"], Path(tmp))[0]


def _executorch() -> tuple[float, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="bench_et_") as tmp:
        script = str(REPO / "benchmarks" / "executorch_loop.py")
        seconds, out = _timed([sys.executable, script, tmp], Path(tmp))
    lines = [line for line in out.splitlines() if line.startswith('{"steps_s"')]
    steps = json.loads(lines[-1])["steps_s"] if lines else {}
    return seconds, steps


@contextlib.contextmanager
def _cpu_load(processes: int) -> Iterator[None]:
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        time.sleep(1.0)
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _segment(got: dict[str, list], rerun: bool) -> None:
    """One cold run of ours, ExecuTorch's loop, and the tracking=none control, appended to `got`;
    with `rerun`, the unchanged re-runs of ours too (quiet only: they are not a load figure)."""
    if rerun:
        cold, reused, logged, stages = _ours_cold_and_reused()
        got["reused"].append(reused)
        got["logged"].append(logged)
    else:
        with tempfile.TemporaryDirectory(prefix="bench_cold_") as tmp:
            cold, stages = _ours_cold(Path(tmp))
    et, steps = _executorch()
    got["cold"].append(cold)
    got["stages"].append(stages)
    got["et"].append(et)
    got["et_steps"].append(steps)
    got["untracked"].append(_ours_untracked())


def _empty() -> dict[str, list]:
    keys = ("cold", "reused", "logged", "stages", "et", "et_steps", "untracked")
    return {key: [] for key in keys}


def _reps(reps: int, load: bool) -> tuple[dict[str, list], dict[str, list]]:
    """(quiet, loaded) measurements; with `load`, each rep's loaded segment follows its quiet one."""
    quiet, loaded = _empty(), _empty()
    for rep in range(reps):
        _segment(quiet, rerun=True)
        if load:
            with _cpu_load(2):
                _segment(loaded, rerun=False)
        print(f"rep {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return quiet, loaded


def _median_parts(rows: list[dict[str, float]]) -> str:
    keys = sorted({k for row in rows for k in row}, key=lambda k: list(rows[0]).index(k))
    return ", ".join(f"{k} {statistics.median(r.get(k, 0.0) for r in rows):.2f}" for k in keys)


def _report(label: str, got: dict[str, list]) -> None:
    cold, et = statistics.median(got["cold"]), statistics.median(got["et"])
    ratios = [a / b for a, b in zip(got["cold"], got["et"], strict=True)]
    print(f"== {label} ({len(got['cold'])} pairs) ==")
    print(f"ours cold: median {cold:.2f} s  [{_median_parts(got['stages'])}]")
    print(f"ExecuTorch loop: median {et:.2f} s  [{_median_parts(got['et_steps'])}]")
    print(
        f"ours ÷ ExecuTorch, pair by pair: median {statistics.median(ratios):.3f} (target <= 0.333)"
    )
    if got["reused"]:  # measured in quiet segments only
        reuse = [b / a for a, b in zip(got["cold"], got["reused"], strict=True)]
        print(
            f"unchanged re-run: median {statistics.median(got['reused']):.2f} s, re-run ÷ cold "
            f"median {statistics.median(reuse):.3f} (target <= 0.2)"
        )
        logged = [b / a for a, b in zip(got["cold"], got["logged"], strict=True)]
        print(
            f"re-run logging a new MLflow run (tracking.log_unchanged=true): median "
            f"{statistics.median(got['logged']):.2f} s, ÷ cold median {statistics.median(logged):.3f}"
        )
    untracked = statistics.median(got["untracked"])
    print(f"control, ours cold with tracking=none: median {untracked:.2f} s")


def _median_interval(values: list[float], resamples: int = 10_000) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median (seeded: the same data, the same interval)."""
    draw = random.Random(0)
    medians = sorted(
        statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples)
    )
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def _slow_down(quiet: dict[str, list], loaded: dict[str, list]) -> None:
    """Loaded ÷ quiet for ours, ExecuTorch and the control: rep by rep, and as medians."""
    per_rep = {
        key: [b / a for a, b in zip(quiet[key], loaded[key], strict=True)]
        for key in ("cold", "et", "untracked")
    }
    ours_vs_et = [o / e for o, e in zip(per_rep["cold"], per_rep["et"], strict=True)]
    agree = sum(r <= 1.0 for r in ours_vs_et)
    print(
        "slow-down per rep (ours / ExecuTorch / control): "
        + ", ".join(
            f"{o:.2f}/{e:.2f}/{c:.2f}"
            for o, e, c in zip(per_rep["cold"], per_rep["et"], per_rep["untracked"], strict=True)
        )
    )
    print(
        f"slow-down under load, median of reps: ours {statistics.median(per_rep['cold']):.2f}x, "
        f"ExecuTorch {statistics.median(per_rep['et']):.2f}x, control (tracking=none) "
        f"{statistics.median(per_rep['untracked']):.2f}x"
    )
    low, high = _median_interval(ours_vs_et)
    print(
        f"ours ÷ ExecuTorch's slow-down, rep by rep: median {statistics.median(ours_vs_et):.3f} "
        f"(95% bootstrap interval {low:.3f}-{high:.3f}), <= 1 in {agree} of {len(ours_vs_et)} "
        "reps (target: median <= 1)"
    )
    medians = {
        key: statistics.median(loaded[key]) / statistics.median(quiet[key]) for key in per_rep
    }
    print(
        f"slow-down as loaded median ÷ quiet median: ours {medians['cold']:.2f}x, "
        f"ExecuTorch {medians['et']:.2f}x, control {medians['untracked']:.2f}x"
    )


def _quick_paths() -> None:
    with tempfile.TemporaryDirectory(prefix="bench_help_") as tmp:
        helps = [_timed([*OURS[:3], "--help"], Path(tmp))[0] for _ in range(5)]
        errors = [_timed([*OURS, "backend.precision=fp8"], Path(tmp))[0] for _ in range(5)]
    print(f"--help: median {statistics.median(helps):.2f} s (target <= 1 s)")
    print(f"config error (backend.precision=fp8): median {statistics.median(errors):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--load", action="store_true", help="also measure under 2 CPU burners")
    parser.add_argument(
        "--quick-only", action="store_true", help="only --help and a config error (no loops)"
    )
    args = parser.parse_args()
    if args.quick_only:
        _quick_paths()
        return
    if importlib.util.find_spec("executorch") is None:
        raise SystemExit("needs the [executorch] extra: pip install -e '.[executorch]'")
    _quick_paths()
    quiet, loaded = _reps(args.reps, args.load)
    _report("quiet", quiet)
    if args.load:
        _report("two CPU-bound processes running", loaded)
        _slow_down(quiet, loaded)


if __name__ == "__main__":
    main()
