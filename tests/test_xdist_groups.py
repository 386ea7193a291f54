"""Tests sharing a module-scoped fixture form one xdist group (tests/conftest.py), so under
`-n 2 --dist loadgroup` one worker builds the fixture once."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def built_once() -> list[str]:
    return []


def test_a_test_using_a_module_fixture_is_grouped_by_its_module(
    built_once: list[str], request: pytest.FixtureRequest
) -> None:
    mark = request.node.get_closest_marker("xdist_group")
    assert mark is not None and mark.args[0] == "tests/test_xdist_groups.py"


def test_a_test_using_only_function_fixtures_is_not_grouped(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert request.node.get_closest_marker("xdist_group") is None


def test_the_suite_runs_with_loadgroup(pytestconfig: pytest.Config) -> None:
    addopts = list(pytestconfig.getini("addopts"))
    assert "--dist" in addopts and addopts[addopts.index("--dist") + 1] == "loadgroup"
