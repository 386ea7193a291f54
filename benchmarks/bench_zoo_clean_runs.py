"""Clean runs of the zoo (issue 12.7): verdict, worst gap and first divergence per run.

    python benchmarks/bench_zoo_clean_runs.py            # default sizes: vit, mobilenet_v2,
                                                         # resnet18, llm × xnnpack, qnn × 3 precisions
    python benchmarks/bench_zoo_clean_runs.py --tiny     # every zoo model (tiny test configs)
                                                         # × xnnpack, qnn, portable × 3 precisions
Outcomes are counted, not timed. Each run is an in-process pipeline with tracking off; exports
are shared through a stage cache in a temp dir.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.helpers.configs import TINY_MODEL_OVERRIDES, ZOO_MODELS, compose_config

PRECISIONS = ("fp32", "fp16", "int8")


def matrix(tiny: bool) -> list[tuple[list[str], str, str]]:
    if tiny:
        models = [TINY_MODEL_OVERRIDES[m] for m in ZOO_MODELS]
        backends = ("xnnpack", "qnn", "portable")
    else:
        models = [[f"model={m}"] for m in ("vit", "mobilenet_v2", "resnet18", "llm")]
        backends = ("xnnpack", "qnn")
    return [(m, b, p) for m in models for b in backends for p in PRECISIONS]


def main(tiny: bool) -> int:
    root = Path(tempfile.mkdtemp(prefix="bench_zoo_"))
    failed = 0
    for model, backend, precision in matrix(tiny):
        label = f"{model[0].removeprefix('model=')}-{backend}-{precision}"
        overrides = [*model, f"backend={backend}", f"backend.precision={precision}"]
        cfg = compose_config(
            root / label,
            [*overrides, "tracking=none", "runtime.iterations=2", f"cache_dir={root / 'cache'}"],
        )
        with open_dict(cfg):
            cfg.run_dir = str(root / label / "run")
        run_pipeline(cfg, print_summary=False)
        summary = json.loads((Path(cfg.run_dir) / "summary.json").read_text())
        first = summary["first_divergence"]
        failed += summary["verdict"] != "pass"
        where = f" first divergence {first['op_names']} local {first['local_gap']}" if first else ""
        print(f"{label}: {summary['verdict']}, worst gap {summary['max_gap']}{where}", flush=True)
    print(f"{len(matrix(tiny))} runs, {failed} failed")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny zoo configs")
    sys.exit(main(parser.parse_args().tiny))
