"""A user's `conf/`, `pipeline/` and `stages/` folders in the working directory do not shadow
the tool: the console command ignores them, `python -m pipeline` too except for `pipeline/`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.invocation import command_prefix
from tests.helpers.cli_runner import REPO, console_script, run_console, shadowing_working_dir


def _module(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _composed(result: subprocess.CompletedProcess[str]) -> bool:
    return result.returncode == 0 and "_target_: stages.backends.xnnpack.XnnpackBackend" in (
        result.stdout
    )


def test_console_command_ignores_the_working_directory(tmp_path: Path) -> None:
    work = shadowing_working_dir(tmp_path / "work")
    result = run_console(console_script(tmp_path / "bin"), "--cfg", "job", cwd=work)
    assert _composed(result), result.stderr


def test_python_m_pipeline_ignores_conf_and_stages(tmp_path: Path) -> None:
    work = shadowing_working_dir(tmp_path / "work")
    for module in ("__init__.py", "__main__.py"):
        (work / "pipeline" / module).unlink()
    (work / "pipeline").rmdir()
    result = _module("-m", "pipeline", "--cfg", "job", cwd=work)
    assert _composed(result), result.stderr


def test_a_pipeline_package_in_the_working_directory_needs_python_P(tmp_path: Path) -> None:
    """What remains: Python resolves `-m pipeline` before the tool starts; `-P` (or the console
    command) keeps the working directory off sys.path."""
    work = shadowing_working_dir(tmp_path / "work")
    shadowed = _module("-m", "pipeline", "--cfg", "job", cwd=work)
    assert "the user's own pipeline/ package was imported" in shadowed.stderr
    assert _composed(_module("-P", "-m", "pipeline", "--cfg", "job", cwd=work))


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [("/venv/bin/delegate-debugger", ["delegate-debugger"]), ("-m", ["python", "-m", "pipeline"])],
)
def test_resume_commands_name_the_command_the_user_ran(
    argv0: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", [argv0, "model=mlp"])
    assert command_prefix() == expected
