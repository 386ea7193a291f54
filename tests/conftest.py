"""Shared fixtures: compose tiny Hydra configs that write into tmp_path."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from pathlib import Path

import pytest
from omegaconf import DictConfig

from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.optional import REQUIRE_ENV


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """With $REQUIRE_OPTIONAL_PARTS=1 (CI) a skip is a failure that says what was missing."""
    if report.skipped and os.environ.get(REQUIRE_ENV) == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but {REQUIRE_ENV}=1 requires every optional part: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator:
    """A skip inside a test (or its fixtures)."""
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator:
    """A skip at module level (`pytest.importorskip` at the top of a test file)."""
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DictConfig]:
    """make_cfg(*overrides) -> composed config writing under tmp_path."""

    def _make(*overrides: str) -> DictConfig:
        return compose_config(tmp_path, overrides)

    return _make


@pytest.fixture
def tiny_cfg(make_cfg: Callable[..., DictConfig]) -> Callable[..., DictConfig]:
    """tiny_cfg("vit", *more_overrides) -> a composed config with a tiny model."""

    def _make(model: str, *overrides: str) -> DictConfig:
        return make_cfg(*TINY_MODEL_OVERRIDES[model], *overrides)

    return _make
