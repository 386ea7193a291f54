"""Numbers say their unit: latency_*_ms is in ms whatever analyze.time_unit, and the run stage's
minimum sits under the analysis's p50/p90 of the same ETDump."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable

import pytest
from omegaconf import DictConfig

from pipeline.runner import run_pipeline
from pipeline.sweeps.comparison import read_timed_ops


def test_latency_is_in_ms_and_the_run_and_analyze_stages_agree(
    tiny_cfg: Callable[..., DictConfig],
) -> None:
    cfg = tiny_cfg("mlp", "tracking=none", "analyze.time_unit=us", "runtime.iterations=7")
    result = run_pipeline(cfg, print_summary=False)
    run_metrics = result.artifacts("run").metrics
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["time_unit"] == "us"
    # The run stage logs only its minimum (p50/p90 are the analysis's, one name each).
    assert "latency_p50_ms" not in run_metrics
    assert run_metrics["latency_min_ms"] <= summary["latency_p50_ms"] <= summary["latency_p90_ms"]
    with (result.run_dir / "events.csv").open() as fh:
        method = [
            e
            for e in csv.DictReader(fh)
            if e["event_name"] == "Method::execute" and e["event_block_name"] == "Execute"
        ]
    assert len(method) == 1 and method[0]["time_unit"] == "us"
    assert float(method[0]["p90"]) == pytest.approx(summary["latency_p90_ms"] * 1e3, rel=1e-9)
    # The sweep comparison turns events.csv's unit back into ms.
    ops = read_timed_ops(result.run_dir / "events.csv")
    slowest_us = max(e["p50"] for e in summary["slowest_ops"])
    assert max(op.p50_ms for op in ops) == pytest.approx(slowest_us / 1e3, rel=1e-9)
