"""The three searches through the real CLI (issue 36.3): `-m search=...` selects our sweeper,
trials are child MLflow runs under one parent, search.json holds the result, the proving
re-run, and for reduce the repro program and command; the same command again resumes."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.cli_runner import run_module
from tests.helpers.search_runs import run_search

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
OUTLIER = ["model=outlier_mlp", "backend=xnnpack", "backend.precision=int8"]
FAULTY_MLP = ["model=mlp", "backend=xnnpack", "backend.fault.node=linear_1", "tracking=none"]


def test_precision_search_finds_the_two_ops_and_logs_trials_under_one_parent(
    tmp_path: Path,
) -> None:
    result, found = run_search(tmp_path, "p1", "search=precision", *OUTLIER)
    assert found["kind"] == "precision"
    assert found["result"] == {"backend.keep_float": ["linear_1", "linear_2"]}
    assert found["verified"]["accuracy_met"] is True and found["verified"]["verdict"] == "pass"
    assert found["trials"] <= 20 and found["complete"] is True
    table = {row["op"]: row for row in found["sensitivity"]}
    assert set(table) == {"linear", "relu", "linear_1", "linear_2"}
    assert table["linear_2"]["snr_only_low_db"] < 20 < table["relu"]["snr_only_low_db"]
    for path in found["sensitivity_files"].values():
        assert Path(path).is_file()
    overlay = json.loads(Path(found["sensitivity_files"]["overlay"]).read_text())
    shortfall = {op: r["value"] for op, r in overlay["graph"]["results"].items()}
    assert shortfall["relu"] == 0.0 < shortfall["linear_1"] and shortfall["linear_2"] > 10
    # Trials reuse the stage cache: only the baseline exports.
    trial_log = (tmp_path / "p1" / "trial-002" / "delegate-debugger.log").read_text()
    assert "[export] reused" in trial_log
    assert "result (paste): 'backend.keep_float=[linear_1,linear_2]'" in result.stdout
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("delegate-debugger").experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep") == "parent"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) == found["trials"]
    artifacts = [a.path for a in client.list_artifacts(parents[0].info.run_id, "search")]
    assert "search/search.json" in artifacts


def _trial_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("search: trial ")]


def test_delegation_search_names_the_faulted_kernel_and_resumes(tmp_path: Path) -> None:
    first, found = run_search(tmp_path, "d", "search=delegation", *FAULTY_MLP)
    assert found["result"] == {"backend.keep_off": ["linear_1"]}
    assert found["verified"]["verdict"] == "pass"
    # The options a trial adds for speed are said once; a trial's line shows what it changes.
    speed = "analyze.scope=verdict runtime.iterations=1 runtime.min_iterations=1 runtime.warmup=0"
    assert first.stdout.count(speed) == 1
    lines = _trial_lines(first.stdout)
    assert len(lines) == found["trials"] == 3
    assert not [line for line in lines if "runtime." in line or "analyze.scope" in line]
    assert lines[1].startswith("search: trial 2/40 [backend.keep_off=[linear_1]]: verdict pass")
    assert lines[2].startswith(
        "search: trial 3/40 [backend.keep_off=[linear_1] cache=false] proving re-run: verdict pass"
    )
    assert max(map(len, lines)) < 140, lines  # was ~190 with the speed options on each
    # The same command again: every trial's outcome is reused but the proving re-run's, which
    # goes on from the ledger's trials (2 of them): trial 3, as in the first run.
    again, second = run_search(tmp_path, "d2", "search=delegation", *FAULTY_MLP)
    assert second["result"] == found["result"] and second["trials"] == 1
    assert second["trials_resumed"] == found["trials"] - 1
    assert "search: resuming, 2 trial outcome(s)" in again.stdout
    assert [line.split(" [")[0] for line in _trial_lines(again.stdout)] == ["search: trial 3/40"]
    assert [t["number"] for t in second["trial_log"]] == [3]
    assert second["verified"]["trial"] == 3 and (tmp_path / "d2" / "trial-003").is_dir()
    assert not (tmp_path / "d2" / "trial-001").exists()


def test_reduce_writes_a_program_and_a_command_that_fails_the_same_way(tmp_path: Path) -> None:
    result, found = run_search(tmp_path, "r", "search=reduce", *FAULTY_MLP)
    assert found["ops"] <= 3 and Path(found["program"]).is_file()
    assert found["verified"]["verdict"] == "fail" and found["same_first_divergence_type"]
    # One form for dB in the output (search.json keeps full precision): the proving re-run's
    # SNR as its trial line and the summary print it.
    snr = found["verified"]["min_snr_db"]
    assert snr != round(snr, 2)
    proving = [line for line in result.stdout.splitlines() if "proving re-run:" in line]
    assert len(proving) == 1 and f"min output SNR {snr:.2f} dB," in proving[0]
    assert f"min output SNR {snr:.2f} dB\n" in result.stdout  # the summary's 'verified by' line
    assert str(snr) not in result.stdout
    numbers = re.findall(r"(-?[0-9.]+|inf) dB", result.stdout)
    assert numbers and all(n == "inf" or re.fullmatch(r"-?[0-9]+\.[0-9]{2}", n) for n in numbers)
    command = shlex.split(found["command"])
    assert "stages=[lower,run,analyze]" in command
    assert command[:3] == ["python", "-m", "pipeline"]
    replay = run_module(
        "pipeline", *command[3:], "tracking=none", f"cache_dir={tmp_path / 'c2'}", cwd=tmp_path
    )
    assert replay.returncode == 3, replay.stderr[-3000:]
    summary = json.loads((Path(found["program"]).parent / "summary.json").read_text())
    assert summary["first_divergence"]["op_types"] == found["first_divergence_op_types"]
