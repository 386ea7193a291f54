"""CI gates on the verdict (issue 24.3): the real CLI exits 3 on a FAIL verdict, apart from
errors (1), in a single run and in a sweep; `analyze.fail_exit_code=false` keeps exit 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.exits.verdict_code import MAP_ERRORS_EXIT_CODE, VERDICT_FAILED_EXIT_CODE
from tests.helpers.cli_runner import run_module

MLP = ["model=mlp", "backend=xnnpack", "tracking=none"]
FAULT = "backend.fault.node=linear_2"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_module("pipeline", *args, f"cache_dir={cwd / 'cache'}", cwd=cwd, timeout=600)


@pytest.mark.e2e
def test_a_failed_verdict_exits_3_and_the_option_keeps_exit_0(tmp_path: Path) -> None:
    clean = _cli(*MLP, f"hydra.run.dir={tmp_path / 'clean'}", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr[-2000:]
    failed = _cli(*MLP, FAULT, f"hydra.run.dir={tmp_path / 'fault'}", cwd=tmp_path)
    assert failed.returncode == VERDICT_FAILED_EXIT_CODE == 3, failed.stderr[-2000:]
    assert "verdict: FAIL" in failed.stderr and "linear_2" in failed.stderr
    assert "== analysis: verdict FAIL" in failed.stdout  # the summary is printed first
    kept = _cli(
        *MLP,
        FAULT,
        "analyze.fail_exit_code=false",
        f"hydra.run.dir={tmp_path / 'kept'}",
        cwd=tmp_path,
    )
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert "== analysis: verdict FAIL" in kept.stdout
    broken = _cli(
        *MLP, "backend.fault.node=absent", f"hydra.run.dir={tmp_path / 'e'}", cwd=tmp_path
    )
    assert broken.returncode == 1  # an error stays 1


@pytest.mark.e2e
def test_a_sweep_counts_failed_verdicts_apart_and_exits_3(tmp_path: Path) -> None:
    result = run_module(
        "pipeline",
        "-m",
        *MLP,
        "backend.fault.node=null,linear_2",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == VERDICT_FAILED_EXIT_CODE, output[-3000:]
    assert "2 jobs, 0 failed, 1 failed verdict(s)" in output
    assert "1 sweep job(s) FAIL their verdict: mlp/xnnpack/fp32" in result.stderr


@pytest.mark.e2e
def test_a_sweep_whose_only_failure_is_map_errors_exits_4(tmp_path: Path) -> None:
    """The example backend mapping only its fused kernels' first op, beside a clean job."""
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "npu_backend.py"
    result = run_module(
        "pipeline",
        "-m",
        "model=mlp",
        "tracking=none",
        "runtime.iterations=2",
        f"backend._target_={example}:NpuBackend",
        "+backend.compile_specs.bug=map_first_op_only,no_outputs",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == MAP_ERRORS_EXIT_CODE == 4, output[-3000:]
    assert "1 sweep job(s) have map errors: mlp/npu/fp32" in result.stderr
