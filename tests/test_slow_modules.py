"""The `slow` list names test modules that exist: a renamed module would silently leave it and
run on every CI Python again (or, removed, be missed by nobody)."""

from __future__ import annotations

from tests.conftest import REPO, SLOW_MODULES


def test_every_slow_module_exists_and_holds_tests() -> None:
    missing = sorted(m for m in SLOW_MODULES if not (REPO / m).is_file())
    assert not missing, f"tests/conftest.py SLOW_MODULES names no such file: {missing}"
    without_tests = sorted(m for m in SLOW_MODULES if "def test_" not in (REPO / m).read_text())
    assert not without_tests, without_tests
