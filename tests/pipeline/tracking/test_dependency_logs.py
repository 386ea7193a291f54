"""Third-party noise stays off the terminal and in the run's log file; our warnings and every
error still print."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from pipeline.tracking.dependency_logs import is_dependency_noise
from stages.run import native_stderr
from tests.helpers.cli_runner import run_module
from tests.helpers.optional import require_executorch


def _record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_dependency_warnings_are_noise_ours_and_errors_are_not() -> None:
    site = "/usr/lib/python3/site-packages/executorch/exir/x.py:10: FutureWarning: old"
    assert is_dependency_noise(_record("py.warnings", logging.WARNING, site))
    assert is_dependency_noise(_record("torch.utils._pytree", logging.WARNING, "Enum"))
    assert is_dependency_noise(_record("executorch.native", logging.INFO, "[cpuinfo_utils.cpp:71]"))
    ours = f"{Path.cwd() / 'my_model.py'}:3: UserWarning: check your input"
    assert not is_dependency_noise(_record("py.warnings", logging.WARNING, ours))
    assert not is_dependency_noise(_record("pipeline", logging.WARNING, "a fault changes nothing"))
    assert not is_dependency_noise(_record("torch", logging.ERROR, "a real failure"))


def test_executorch_run_prints_no_third_party_warnings_and_logs_them(tmp_path: Path) -> None:
    """Run as a search's trials run (no warm-up: the runtime's first call, which prints the
    cpuinfo lines, is a timed one; issue 44 saw them on the terminal during searches)."""
    require_executorch()
    run_dir = tmp_path / "run"
    args = ["model=mlp", "backend=executorch_xnnpack", "tracking=none", f"hydra.run.dir={run_dir}"]
    args += ["runtime.warmup=0", "runtime.iterations=1", "runtime.min_iterations=1"]
    proc = run_module("pipeline", *args, cwd=tmp_path, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    for noise in ("FutureWarning", "cpuinfo_utils", "_pytree"):
        assert noise not in out, out
    log = (run_dir / "delegate-debugger.log").read_text()
    assert "FutureWarning" in log and "cpuinfo_utils" in log


class _Records(logging.Handler):
    """The records a logger hands it, kept."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_first_native_call_of_a_process_is_captured_and_later_ones_are_not(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What fd 2 receives during the process's first call goes to the log; after it, nothing is
    captured (timed calls keep their cost)."""
    monkeypatch.setattr(native_stderr, "_first_call_done", False)
    handler = _Records(logging.INFO)
    logger = native_stderr.log
    monkeypatch.setattr(logger, "level", logging.INFO)
    logger.addHandler(handler)
    try:
        with native_stderr.first_native_call_to_log():
            os.write(2, b"[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version\n")
        with native_stderr.first_native_call_to_log():
            os.write(2, b"a later line\n")
    finally:
        logger.removeHandler(handler)
    logged = " ".join(r.getMessage() for r in handler.records)
    assert "cpuinfo_utils" in logged and "cpuinfo_utils" not in capfd.readouterr().err
    assert "a later line" not in logged
