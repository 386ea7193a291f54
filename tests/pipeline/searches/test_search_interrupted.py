"""A search stopped with Ctrl-C (issue 36.3) exits 130 in one line and keeps the trials it
finished; the same command again resumes from them and numbers its own after them. A backend
file whose second lowering announces itself and sleeps holds trial 2 until the test has sent
its signal (no timing)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.helpers.cli_processes import no_process_left, start_cli, wait_for_file  # noqa: F401
from tests.helpers.cli_runner import run_module

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("no_process_left"),
]
SLOW_SECOND_LOWERING = """
import time
from pathlib import Path

from stages.backends.xnnpack import XnnpackBackend


class SlowSecondLowering(XnnpackBackend):
    name = "slow_second"

    def preprocess(self, partition, compile_specs):
        first = Path("lowered_once")
        if first.exists() and not Path("go_on").exists():
            Path("second_lowering_started").write_text("now")
            time.sleep(600)  # the test interrupts the search long before this ends
        first.write_text("yes")
        return super().preprocess(partition, compile_specs)
"""
ARGS = [
    "-m",
    "search=delegation",
    "model=mlp",
    "backend._target_=./slow_backend.py:SlowSecondLowering",
    "backend.fault.node=linear_1",
    "tracking=none",
    "hydra.sweep.dir=sweep",
]


def test_an_interrupted_search_resumes_from_its_finished_trials(tmp_path: Path) -> None:
    (tmp_path / "slow_backend.py").write_text(SLOW_SECOND_LOWERING)
    process = start_cli(ARGS, tmp_path)
    wait_for_file(process, tmp_path / "second_lowering_started", "trial 2 never lowered")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, out + err
    assert "search: trial 1/40 [no overrides]: verdict fail" in out
    assert "Traceback" not in err and err.strip().startswith("error: "), err
    (tmp_path / "go_on").write_text("yes")
    again = run_module("pipeline", *ARGS, cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "search: resuming, 1 trial outcome(s)" in again.stdout
    found = json.loads((tmp_path / "sweep" / "search.json").read_text())
    assert found["result"] == {"backend.keep_off": ["linear_1"]} and found["trials_resumed"] == 1
    # Its trials go on from the one recorded: 2 and 3, none numbered 1 again, and the recorded
    # baseline's job dir (its FAILing run) is left as it was.
    assert [t["number"] for t in found["trial_log"]] == [2, 3]
    assert "search: trial 2/40 [backend.keep_off=[linear_1]]: verdict pass" in again.stdout
    assert "search: trial 1/" not in again.stdout
    baseline = json.loads((tmp_path / "sweep" / "trial-001" / "summary.json").read_text())
    assert baseline["verdict"] == "fail"
