"""Nothing a run or a sweep starts (tracking child, sweep workers) outlives the command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.session_processes import kill_session, run_in_own_session, survivors_after

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux only)"),
]


def test_the_watch_finds_a_process_left_running(tmp_path: Path) -> None:
    """The check itself: a command that leaves a child behind is caught."""
    code = "import subprocess; subprocess.Popen(['sleep', '60'])"
    result, session = run_in_own_session("-c", code, cwd=tmp_path)
    survivors = survivors_after(session, grace_s=0.5)  # a child that never ends
    kill_session(survivors)
    assert result.returncode == 0
    assert [s.cmdline for s in survivors] == ["sleep 60"]


def test_a_run_leaves_no_process(tmp_path: Path) -> None:
    """The MLflow tracking child ends with the run."""
    result, session = run_in_own_session(
        "-m",
        "pipeline",
        "model=mlp",
        "backend=xnnpack",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    survivors = survivors_after(session)
    kill_session(survivors)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MLflow run" in result.stdout + result.stderr  # it was tracked (a child process)
    assert survivors == [], survivors


def test_a_parallel_sweep_with_a_failing_job_leaves_no_process(tmp_path: Path) -> None:
    """The default launcher's workers and their fork server end before the sweep command returns,
    failure or not."""
    result, session = run_in_own_session(
        "-m",
        "pipeline",
        "-m",
        "model=mlp,three_inputs",
        "backend=xnnpack",
        "backend.fault.node=linear_2",  # three_inputs has no such node: its job fails
        "hydra.launcher.n_jobs=2",  # workers even when other sessions keep the cores busy
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
    )
    survivors = survivors_after(session)
    kill_session(survivors)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "1 sweep job(s) failed" in output, output[-3000:]
    assert "forked from a warm one" in output  # the jobs ran in worker processes
    assert survivors == [], survivors
