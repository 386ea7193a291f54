"""The skip rule for optional parts: a skip names what to install; CI's switch makes it a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SKIPPING_TEST = """
import pytest

def test_needs_something():
    pytest.skip("needs X: pip install x")

def test_plain():
    assert True
"""


def _pytest(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport\n")
    (tmp_path / "test_sample.py").write_text(SKIPPING_TEST)
    env = {k: v for k, v in os.environ.items() if k != "REQUIRE_OPTIONAL_PARTS"}
    env["PYTHONPATH"] = str(REPO)
    if require is not None:
        env["REQUIRE_OPTIONAL_PARTS"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_the_switch_a_skip_is_a_skip_with_its_reason(tmp_path: Path) -> None:
    result = _pytest(tmp_path, None)
    assert result.returncode == 0, result.stdout
    assert "1 passed, 1 skipped" in result.stdout and "needs X: pip install x" in result.stdout


def test_with_the_switch_a_skip_fails_and_says_what_is_missing(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "1")
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed" in result.stdout
    assert "REQUIRE_OPTIONAL_PARTS=1 requires every optional part" in result.stdout
    assert "needs X: pip install x" in result.stdout
