"""One directory per invocation: run and sweep dirs carry a per-process suffix after the time."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.cli_runner import REPO


def _start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return out


def test_default_dirs_differ_between_processes_started_together(tmp_path: Path) -> None:
    resolved = ("--cfg", "all", "--resolve", "model=mlp")
    first, second = _start(tmp_path, *resolved), _start(tmp_path, *resolved)
    dirs = []
    for text in (_finish(first), _finish(second)):
        run = re.search(r"^  run:\n    dir: (\S+)", text, re.M)
        sweep = re.search(r"^  sweep:\n    dir: (\S+)", text, re.M)
        assert run and sweep, text[:2000]
        # <date>/<time>-<pid>-<4 hex>[-model-backend]: still sorted by time, unique per process.
        assert re.fullmatch(r"outputs/runs/[\d-]+/[\d-]{8}-\d+-[0-9a-f]{4}-mlp-xnnpack", run[1])
        assert re.fullmatch(r"outputs/multirun/[\d-]+/[\d-]{8}-\d+-[0-9a-f]{4}", sweep[1])
        dirs.append((run[1], sweep[1]))
    assert dirs[0][0] != dirs[1][0] and dirs[0][1] != dirs[1][1]


@pytest.mark.e2e
def test_two_sweeps_started_in_the_same_second_keep_their_own_comparison(
    tmp_path: Path,
) -> None:
    # The time part pinned to one value: exactly the "same second" case, the suffix as in config.
    same_second = "hydra.sweep.dir=outputs/multirun/same-day/12-00-00-${run_suffix:}"
    common = ("-m", "backend=portable,xnnpack", "stages=[export]", "hydra/launcher=basic")
    sweeps = {
        model: _start(tmp_path, *common, f"model={model}", same_second)
        for model in ("mlp", "three_inputs")
    }
    for process in sweeps.values():
        _finish(process)
    sweep_dirs = sorted((tmp_path / "outputs" / "multirun" / "same-day").iterdir())
    assert len(sweep_dirs) == 2, sweep_dirs
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    parents = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], "tags.sweep = 'parent'"
    )
    assert {p.data.tags["sweep_dir"] for p in parents} == {str(d) for d in sweep_dirs}
    for sweep_dir in sweep_dirs:
        with (sweep_dir / "comparison" / "comparison_runs.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        (model,) = {r["model"] for r in rows}  # one sweep's jobs only, never the other's
        assert sorted(r["backend"] for r in rows) == ["portable", "xnnpack"]
        jobs = sorted(p.name for p in sweep_dir.iterdir() if p.name[0].isdigit())
        assert jobs == [f"0-{model}-portable-fp32", f"1-{model}-xnnpack-fp32"]
