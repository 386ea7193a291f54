"""The sweep comparison over real MLflow runs: p50 in ms whatever each run's time unit, and the
least accurate backend judged by each run's own gap direction (summary.json)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.sweeps.comparison import RUN_COLUMNS, compare_runs
from stages.analyze.link.event_table import write_csv


def _run_dir(root: Path, unit: str, p50: float, metric: str, gap: float, higher: bool) -> Path:
    root.mkdir(parents=True)
    write_csv(
        root / "events.csv",
        ("event_block_name", "event_name", "op_names", "p50", "time_unit"),
        [
            {
                "event_block_name": "Execute",
                "event_name": "k0",
                "op_names": ["linear"],
                "p50": p50,
                "time_unit": unit,
            }
        ],
    )
    write_csv(
        root / "numeric_gap.csv",
        ("op_names", "status", "gap_metric", f"local_{metric}"),
        [{"op_names": ["linear"], "status": "ok", "gap_metric": metric, f"local_{metric}": gap}],
    )
    summary = {"gap_metric": metric, "higher_is_better": higher, "first_divergence": None}
    (root / "summary.json").write_text(json.dumps(summary))
    return root


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> MlflowClient:
    """One sqlite store for the module (creating its schema takes seconds)."""
    return MlflowClient(f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}")


@pytest.mark.parametrize(
    ("metric", "higher_is_better", "least_accurate"),
    [("snr", True, "qnn-fp16"), ("mse", False, "xnnpack-fp32")],
)
def test_per_op_table_in_ms_with_the_runs_own_gap_direction(
    client: MlflowClient, tmp_path: Path, metric: str, higher_is_better: bool, least_accurate: str
) -> None:
    experiment = client.create_experiment(f"cmp-{metric}")
    # xnnpack reports in us (2000 us = 2 ms), qnn in ms (1 ms); gaps 40 and 20.
    specs = [("xnnpack", "fp32", "us", 2000.0, 40.0), ("qnn", "fp16", "ms", 1.0, 20.0)]
    runs = []
    for backend, precision, unit, p50, gap in specs:
        run_dir = _run_dir(tmp_path / backend, unit, p50, metric, gap, higher_is_better)
        tags = {"model": "m", "backend": backend, "precision": precision, "run_dir": str(run_dir)}
        run = client.create_run(experiment, tags=tags)
        client.log_metric(run.info.run_id, "analyze.latency_p50_ms", p50)
        client.set_terminated(run.info.run_id, "FINISHED")
        runs.append(client.get_run(run.info.run_id))

    comparison = compare_runs(client, runs, tmp_path / "out")
    (ops,) = list(csv.DictReader((tmp_path / "out" / "comparison_ops_m.csv").open()))
    assert float(ops["p50_ms[xnnpack-fp32 @ emulated]"]) == pytest.approx(2.0)
    assert float(ops["p50_ms[qnn-fp16 @ emulated]"]) == pytest.approx(1.0)
    assert ops["slowest"] == "xnnpack-fp32" and ops["least_accurate"] == least_accurate
    rows = list(csv.DictReader(comparison.runs.open()))
    assert tuple(rows[0]) == RUN_COLUMNS and {r["gap_metric"] for r in rows} == {metric}
    # The terminal shows the per-op comparison's top rows, not only the file's name.
    printed = comparison.text.split("per-op comparison of m:", 1)[1].splitlines()
    assert "p50 ms [xnnpack-fp32]" in printed[1] and f"local {metric} [qnn-fp16]" in printed[1]
    header, values = (re.split(r"\s{2,}", line.strip()) for line in printed[1:3])
    cells = dict(zip(header, values, strict=True))
    assert cells["op"] == "linear" and cells["p50 ms [xnnpack-fp32]"] == "2"
    assert cells["p50 ms [qnn-fp16]"] == "1" and cells[f"local {metric} [qnn-fp16]"] == "20"
    assert "comparison_ops_m.csv" in comparison.text


def test_printed_table_tells_runs_of_one_config_apart(client: MlflowClient, tmp_path: Path) -> None:
    """Two runs of the same model/backend/precision print alike but for their run ids."""
    experiment = client.create_experiment("cmp-twice")
    runs = []
    for attempt in ("a", "b"):
        run_dir = _run_dir(tmp_path / attempt, "ms", 1.0, "snr", 40.0, True)
        tags = {"model": "m", "backend": "xnnpack", "precision": "fp32", "run_dir": str(run_dir)}
        run = client.create_run(experiment, tags=tags)
        client.set_terminated(run.info.run_id, "FINISHED")
        runs.append(client.get_run(run.info.run_id))
    text = compare_runs(client, runs, tmp_path / "out").text
    header, *lines = text.split("\nper-op comparison")[0].splitlines()
    assert "run_id" in header and len(lines) == 2 and lines[0] != lines[1]
    assert all(any(r.info.run_id in line for line in lines) for r in runs)
