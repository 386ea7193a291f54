"""Shared fixtures: compose tiny Hydra configs that write into tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config


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
