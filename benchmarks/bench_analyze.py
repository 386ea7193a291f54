"""Analyze-stage figures, side by side in one run:

- the analyze stage's time for the default vit beside the run stage's;
- numeric gap time on a 4-block ViT vs ExecuTorch's Inspector.calculate_numeric_gap on the same
  model (its own lowering and runtime), when the `[executorch]` extra is installed.

    PYTHONPATH=. python benchmarks/bench_analyze.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.analyze.compare.comparators import build_comparators
from stages.analyze.compare.numeric_gap import compute_numeric_gap
from stages.analyze.compare.runtime_outputs import runtime_outputs
from stages.analyze.link.linking import ProgramIndex
from stages.formats.etdump import read_etdump
from stages.handover.etrecord import etrecord_program, load_etrecord
from tests.helpers.configs import compose_config

REPO = Path(__file__).resolve().parents[1]
VIT4 = {"image_size": 224, "patch_size": 16, "dim": 192, "depth": 4, "heads": 3}


def _pipeline(root: Path, label: str, *overrides: str) -> tuple[Path, dict[str, float]]:
    cfg = compose_config(root / label, ["tracking=none", *overrides])
    with open_dict(cfg):
        cfg.run_dir = str(root / label / "run")
    result = run_pipeline(cfg, print_summary=False)
    return Path(cfg.run_dir), {s.name: s.seconds for s in result.stages}


def _gap_seconds(run_dir: Path, names: list[str], rounds: int = 3) -> tuple[float, int]:
    record = load_etrecord(run_dir / "etrecord.zip")
    dump = read_etdump(run_dir / "etdump.etdp")
    buffer = (run_dir / "debug.bin").read_bytes()
    index = ProgramIndex.from_etrecord(record)
    program = etrecord_program(record)
    comparators = build_comparators(names, None)
    best, rows = float("inf"), 0
    for _ in range(rounds):
        started = time.perf_counter()
        outputs = runtime_outputs(dump, buffer, index)
        _, gap_rows = compute_numeric_gap(
            outputs, program, record.representative_inputs, comparators
        )
        best = min(best, time.perf_counter() - started)
        rows = len(gap_rows)
    return best, rows


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench_analyze_"))
    _, seconds = _pipeline(root, "vit", "model=vit", "backend=xnnpack")
    print(
        f"default vit, xnnpack fp32: run stage {seconds['run']:.2f} s, "
        f"analyze stage {seconds['analyze']:.2f} s "
        f"(analyze ÷ run = {seconds['analyze'] / seconds['run']:.2f})"
    )

    overrides = [f"model.kwargs.{k}={v}" for k, v in VIT4.items()]
    run_dir, _ = _pipeline(
        root,
        "vit4",
        "model=vit",
        "backend=xnnpack",
        *overrides,
        "model.inputs=[{shape:[1,3,224,224]}]",
    )
    one, rows = _gap_seconds(run_dir, ["snr"])
    three, _ = _gap_seconds(run_dir, ["mse", "mean_abs", "snr"])
    print(
        f"4-block vit numeric gap (ours, {rows} rows incl. local gaps): "
        f"snr only {one:.3f} s; mse+mean_abs+snr {three:.3f} s"
    )

    if importlib.util.find_spec("executorch") is None:
        print("ExecuTorch side skipped: pip install -e '.[executorch]'")
        return
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/executorch_numeric_gap.py"), json.dumps(VIT4)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=900,
    )
    if proc.returncode != 0:
        print("ExecuTorch side failed:\n" + proc.stderr[-3000:])
        return
    et = json.loads(proc.stdout.strip().splitlines()[-1])
    total = sum(et["gap_s"].values())
    print(
        f"ExecuTorch Inspector.calculate_numeric_gap, same model ({et['rows']} rows): "
        + ", ".join(f"{k} {v:.3f} s" for k, v in et["gap_s"].items())
        + f" (Inspector() itself {et['inspector_init_s']:.2f} s)"
    )
    print(
        f"ratio, three metrics: ExecuTorch {total:.3f} s ÷ ours {three:.3f} s = {total / three:.1f}×"
    )
    print(
        f"per comparison: ExecuTorch {min(et['gap_s'].values()) / et['rows'] * 1e3:.2f} ms "
        f"(one per row), ours {one / (2 * rows) * 1e3:.2f} ms (accumulated + local per row)"
    )
    per_metric_et = min(et["gap_s"].values())
    print(
        f"ratio, one metric (ExecuTorch's fastest call ÷ ours): "
        f"{per_metric_et:.3f} ÷ {one:.3f} = {per_metric_et / one:.1f}×"
    )


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    sys.path.insert(0, str(REPO))
    main()
