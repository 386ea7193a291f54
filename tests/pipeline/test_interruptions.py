"""Interruptions are recorded truthfully: Ctrl-C ends the run KILLED with one line; SIGKILL is found.

The CLI runs for real in a subprocess. A model file whose factory announces itself and then
sleeps keeps the export stage busy until the test has sent its signal, so no timing guesses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.tracking.liveness import (
    HOST_TAG,
    KILLED_REASON_TAG,
    PID_TAG,
    START_TAG,
    process_tags,
)
from pipeline.tracking.liveness import main as run_liveness_main
from pipeline.tracking.mlflow_tracker import ensure_experiment, store_lock
from tests.helpers.cli_processes import no_process_left, start_cli, wait_for_file  # noqa: F401

_OUT = {"capture_output": True, "text": True, "check": True}
_STORE_CREATION = " INFO mlflow.store.db.utils: "
SLOW_MODEL = """
import time
from pathlib import Path

from torch import nn


def make():
    Path("factory_started").write_text("now")
    time.sleep(600)  # the test interrupts or kills the process long before this ends
    return nn.Linear(4, 2)
"""


pytestmark = pytest.mark.usefixtures("no_process_left")


def _start(cwd: Path, own_group: bool = False, sweep: bool = False) -> subprocess.Popen[str]:
    (cwd / "slow_model.py").write_text(SLOW_MODEL)
    args = [
        "model=custom",
        "model._target_=./slow_model.py:make",
        "model.inputs=[{shape:[1,4]}]",
        "backend=portable",
        "hydra.run.dir=outputs/runs/interrupted",
    ]
    if sweep:  # one job, in this process, under a parent run
        args = ["-m", *args[:-1], "hydra/launcher=basic", "hydra.sweep.dir=outputs/sweep"]
    return start_cli(args, cwd, own_group)


def _wait_for_export(process: subprocess.Popen[str], cwd: Path) -> None:
    """Until the export stage is inside the model factory (the tracking run has started)."""
    wait_for_file(process, cwd / "factory_started", "the export stage never started")


def _wait_for_runs(cwd: Path, count: int) -> list:  # type: ignore[type-arg]
    """Until the store holds `count` runs (the tracking process creates them beside export)."""
    deadline = time.monotonic() + 600  # a hang guard, not a measure: generous under load
    while (cwd / "outputs" / "mlflow.db").exists() is False or len(runs := _runs(cwd)) < count:
        assert time.monotonic() < deadline, "the tracking run never appeared"
        time.sleep(0.1)
    return runs


def _runs(cwd: Path) -> list:  # type: ignore[type-arg]
    uri = f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}"
    with store_lock(uri):  # the tracking process may be creating the store right now
        client = MlflowClient(uri)
        experiments = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(experiments, order_by=["attributes.start_time ASC"])


def test_ctrl_c_ends_the_run_killed_with_one_line_naming_the_resume_command(
    tmp_path: Path,
) -> None:
    process = _start(tmp_path)
    _wait_for_export(process, tmp_path)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)

    assert process.returncode == 130, err
    assert "Traceback" not in out + err, err
    # MLflow announces creating a fresh store at start-up; everything else is the one line.
    lines = [line for line in err.splitlines() if line.strip() and _STORE_CREATION not in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: interrupted; finished stages are kept, resume with: ")
    assert "python -m pipeline model=custom" in lines[0]
    assert "hydra.run.dir=" in lines[0] and "outputs/runs/interrupted" in lines[0]

    (run,) = _runs(tmp_path)
    assert run.info.status == "KILLED"
    assert run.data.tags["stage.export"] == "interrupted"
    assert "Ctrl-C" in run.data.tags["error"]
    assert run.data.tags[PID_TAG] == str(process.pid)


def test_a_run_killed_hard_is_marked_killed_by_the_next_start(tmp_path: Path) -> None:
    first = _start(tmp_path, own_group=True)
    _wait_for_export(first, tmp_path)
    (running,) = _wait_for_runs(tmp_path, 1)
    assert running.info.status == "RUNNING"
    os.killpg(first.pid, signal.SIGKILL)  # the pipeline and its tracking process at once
    first.communicate(timeout=60)
    (still,) = _runs(tmp_path)
    assert still.info.status == "RUNNING"  # nothing in a SIGKILLed process group can end it

    (tmp_path / "factory_started").unlink()
    second = _start(tmp_path)
    _wait_for_export(second, tmp_path)
    try:
        dead, alive = _wait_for_runs(tmp_path, 2)  # the second run has started: the check ran
        assert dead.info.run_id == running.info.run_id
        assert dead.info.status == "KILLED"
        assert str(first.pid) in dead.data.tags[KILLED_REASON_TAG]
        assert dead.data.tags[HOST_TAG] in dead.data.tags[KILLED_REASON_TAG]
        # The live run (its process sleeping in the export stage) is left alone.
        assert alive.info.status == "RUNNING"
        assert alive.data.tags[PID_TAG] == str(second.pid)
    finally:
        second.kill()
        second.communicate(timeout=60)


def test_a_pipeline_killed_alone_has_its_run_ended_by_its_tracking_process(
    tmp_path: Path,
) -> None:
    process = _start(tmp_path)
    _wait_for_export(process, tmp_path)
    (running,) = _wait_for_runs(tmp_path, 1)
    process.kill()  # SIGKILL to the pipeline only: its tracking process sees the channel close
    process.communicate(timeout=60)
    deadline = time.monotonic() + 600  # a hang guard, not a measure
    while (run := _runs(tmp_path)[0]).info.status == "RUNNING":
        assert time.monotonic() < deadline, "the tracking process never ended the run"
        time.sleep(0.1)
    assert run.info.run_id == running.info.run_id
    assert run.info.status == "KILLED"
    assert "ended without finishing" in run.data.tags["error"]


def test_ctrl_c_in_a_sweep_ends_the_parent_run_too(tmp_path: Path) -> None:
    process = _start(tmp_path, sweep=True)
    _wait_for_export(process, tmp_path)
    _wait_for_runs(tmp_path, 2)  # the parent and the job's run
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)

    assert process.returncode == 130, err
    assert "Traceback" not in err, err
    runs = _runs(tmp_path)
    (parent,) = [r for r in runs if r.data.tags.get("sweep") == "parent"]
    (job,) = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "KILLED" and "Ctrl-C" in parent.data.tags["error"]
    assert job.info.status == "KILLED" and job.data.tags["stage.export"] == "interrupted"


def test_the_cleanup_command_marks_only_dead_processes_runs_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = ensure_experiment(uri, "liveness")
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_OUT)
    dead_pid = finished.stdout.strip()
    me = process_tags()
    runs = {
        "dead process": {**me, PID_TAG: dead_pid, START_TAG: ""},
        "pid reused by a younger process": {**me, START_TAG: "1"},
        "alive (this process)": me,
        "another host": {**me, HOST_TAG: "elsewhere", PID_TAG: dead_pid},
    }
    ids = {
        name: client.create_run(experiment, tags=tags).info.run_id for name, tags in runs.items()
    }

    assert run_liveness_main(["--tracking-uri", uri]) == 0
    assert "2 run(s) marked KILLED" in capsys.readouterr().out
    status = {name: client.get_run(run_id).info.status for name, run_id in ids.items()}
    assert status == {
        "dead process": "KILLED",
        "pid reused by a younger process": "KILLED",
        "alive (this process)": "RUNNING",
        "another host": "RUNNING",
    }
