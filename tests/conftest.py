"""Shared fixtures: compose tiny Hydra configs that write into tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, open_dict

from pipeline.config import register_configs

register_configs()

# Small model configs for unit tests: the whole suite must stay fast on 2 cores.
TINY_MODEL_OVERRIDES: dict[str, list[str]] = {
    "vit": [
        "model=vit",
        "model.kwargs.depth=1",
        "model.kwargs.dim=32",
        "model.kwargs.heads=2",
        "model.kwargs.image_size=32",
        "model.kwargs.patch_size=16",
        "model.kwargs.num_classes=10",
        "model.inputs=[{shape:[1,3,32,32]}]",
    ],
    "mlp": ["model=mlp"],
}


def compose_config(tmp_path: Path, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose conf/config.yaml with overrides; artifacts, cache and MLflow store in tmp_path."""
    with initialize_config_module(version_base="1.3", config_module="conf"):
        cfg = compose(
            "config",
            overrides=[
                f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                f"cache_dir={tmp_path / 'cache'}",
                *overrides,
            ],
        )
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    return cfg


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DictConfig]:
    """make_cfg(*overrides) -> composed config writing under tmp_path."""

    def _make(*overrides: str) -> DictConfig:
        return compose_config(tmp_path, overrides)

    return _make
