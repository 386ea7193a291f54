"""A run on other inputs than the ETRecord's (issue 24.5): every output that depends on the
inputs differs from the first op on, and the summary says to check the inputs (a real fault
does not)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import torch

from stages.analyze.config import AnalyzeConfig
from stages.analyze.stage import run_analyze
from stages.run.config import RuntimeConfig
from stages.run.stage import run_run
from tests.helpers.analyze_runs import RunTiny, read_summary

NOTE = "may not be the ETRecord's representative inputs"


def _run_on(run_dir: Path, inputs: Path, out: Path) -> Path:
    """The same lowered program run on `inputs`, analysed against the run's own ETRecord."""
    (out / "run").mkdir(parents=True)
    (out / "analyze").mkdir()
    program = run_dir / "lowered_program.zip"
    ran = run_run(RuntimeConfig(iterations=1), program, inputs, out / "run")
    etrecord = run_dir / "etrecord.zip"
    return run_analyze(
        AnalyzeConfig(), ran.etdump, ran.debug_buffer, etrecord, out / "analyze"
    ).summary


def test_other_inputs_are_named_as_the_likely_cause(run_tiny: RunTiny, tmp_path: Path) -> None:
    run_dir = run_tiny("inputs-mlp-xnnpack", "mlp", "backend=xnnpack")
    samples = torch.load(run_dir / "inputs.pt", weights_only=True)
    torch.manual_seed(7)
    other = tmp_path / "other_inputs.pt"
    torch.save([tuple(torch.randn_like(t) for t in sample) for sample in samples], other)

    summary = read_summary(_run_on(run_dir, other, tmp_path / "other").parent)
    assert summary["verdict"] == "fail" and summary["first_divergence"] is not None
    assert NOTE in summary["verdict_reason"]
    # The check it suggests runs and prints the ETRecord's inputs.
    command = re.search(r'`(python -c ".*?")`', summary["verdict_reason"])
    assert command is not None
    shown = subprocess.run(command.group(1), shell=True, capture_output=True, text=True)
    assert shown.returncode == 0 and "tensor(" in shown.stdout, shown.stderr

    same = read_summary(_run_on(run_dir, run_dir / "inputs.pt", tmp_path / "same").parent)
    assert same["verdict"] == "pass" and NOTE not in same["verdict_reason"]


def test_a_real_fault_is_not_blamed_on_the_inputs(run_tiny: RunTiny) -> None:
    summary = read_summary(
        run_tiny("inputs-fault-mlp", "mlp", "backend=xnnpack", "backend.fault.node=linear_2")
    )
    assert summary["verdict"] == "fail" and NOTE not in summary["verdict_reason"]
    assert sys.executable  # the suggested command uses the `python` on PATH, as users type it
