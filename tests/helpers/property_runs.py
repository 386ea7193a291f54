"""One random graph through export → lower → run → analyze on every backend (issue 12.5)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.helpers.configs import compose_config
from tests.helpers.random_graphs import model_inputs

FP32_BACKENDS = ("xnnpack", "qnn", "portable")
OTHER_PRECISIONS = (("qnn", "fp16"), ("xnnpack", "int8"), ("xnnpack", "fp16"), ("qnn", "int8"))


def inputs_override(spec: dict[str, Any]) -> str:
    """`model.inputs=[...]` in the command-line grammar."""
    items = []
    for item in model_inputs(spec):
        fields = [f"shape:[{','.join(str(d) for d in item['shape'])}]"]
        fields += [f"{key}:{item[key]}" for key in ("dtype", "high") if key in item]
        items.append("{" + ",".join(fields) + "}")
    return f"model.inputs=[{','.join(items)}]"


def run_graph(spec: dict[str, Any], root: Path, backend: str, precision: str) -> Path:
    """Run the pipeline on the graph; export is shared through the stage cache under root."""
    label = f"{backend}-{precision}"
    cfg = compose_config(
        root / label,
        [
            "model=custom",
            "model._target_=tests.helpers.random_graphs.make_graph",
            inputs_override(spec),
            f"backend={backend}",
            f"backend.precision={precision}",
            "tracking=none",
            "runtime.iterations=1",
            "runtime.warmup=0",
            f"cache_dir={root / 'cache'}",
        ],
    )
    with open_dict(cfg):
        cfg.model.kwargs = {"spec": json.dumps(spec, sort_keys=True)}
        cfg.run_dir = str(root / label / "run")
    run_pipeline(cfg, print_summary=False)
    return Path(cfg.run_dir)


def inexact_rows(run_dir: Path) -> list[str]:
    """What is not exact in a run that should be: the verdict, gaps, mismatches."""
    summary = json.loads((run_dir / "summary.json").read_text())
    problems = [] if summary["verdict"] == "pass" else [f"verdict {summary['verdict']}"]
    with (run_dir / "numeric_gap.csv").open() as fh:
        for row in csv.DictReader(fh):
            where = f"{row['op_names']} ({row['comparison']}, {row['status']})"
            if row["status"] not in ("ok", "no_reference"):
                problems.append(where)
            elif row["comparison"] == "float" and row["status"] == "ok":
                if row["snr"] != "inf" or row.get("local_snr", "inf") not in ("inf", ""):
                    problems.append(f"{where}: snr {row['snr']}, local {row.get('local_snr')}")
            elif row["status"] == "ok" and row["mismatches"] != "0.0":
                problems.append(f"{where}: {row['mismatches']} mismatches")
    return problems


def check_graph(spec: dict[str, Any], root: Path, extra: tuple[str, str]) -> list[str]:
    """Problems found (empty: fine): fp32 on every backend must be exact and pass; the extra
    (backend, precision) run must finish. A crash propagates as the exception it is."""
    problems = []
    for backend in FP32_BACKENDS:
        run_dir = run_graph(spec, root, backend, "fp32")
        problems += [f"{backend} fp32: {p}" for p in inexact_rows(run_dir)]
    run_dir = run_graph(spec, root, *extra)
    if not (run_dir / "summary.json").is_file():
        problems.append(f"{extra}: no summary.json")
    return problems
