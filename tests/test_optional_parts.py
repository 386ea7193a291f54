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


MODULE_SKIP = """
import pytest

pytest.importorskip("no_such_module_anywhere", reason="needs Y: pip install y")

def test_never_collected():
    assert True
"""


def _pytest(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n"
    )
    (tmp_path / "test_sample.py").write_text(SKIPPING_TEST)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
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
    assert "1 passed, 2 skipped" in result.stdout
    assert "needs X: pip install x" in result.stdout and "needs Y: pip install y" in result.stdout


def test_with_the_switch_every_skip_fails_and_says_what_is_missing(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "1")
    assert result.returncode != 0, result.stdout
    assert "REQUIRE_OPTIONAL_PARTS=1 requires every optional part" in result.stdout
    assert "needs Y: pip install y" in result.stdout  # the module-level skip: a collection error
    (tmp_path / "test_module_skip.py").unlink()
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "REQUIRE_OPTIONAL_PARTS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert inner.returncode == 1 and "1 failed, 1 passed" in inner.stdout, inner.stdout
    assert "needs X: pip install x" in inner.stdout
