"""Tiny zoo model overrides and Hydra config composition that writes into a temp dir."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_module
from omegaconf import DictConfig, open_dict

from pipeline.config.schema import register_configs

register_configs()

# Small model configs for unit tests: the whole suite must stay fast on 2 cores.
TINY_MODEL_OVERRIDES: dict[str, list[str]] = {
    "vit": [
        "model=vit",
        "model.kwargs.depth=2",
        "model.kwargs.dim=32",
        "model.kwargs.heads=2",
        "model.kwargs.image_size=32",
        "model.kwargs.patch_size=8",
        "model.kwargs.num_classes=10",
        "model.inputs=[{shape:[1,3,32,32]}]",
    ],
    "mobilenet_v2": [
        "model=mobilenet_v2",
        "model.kwargs.width_mult=0.25",
        "model.kwargs.stages=3",
        "model.kwargs.num_classes=10",
        "model.inputs=[{shape:[1,3,32,32]}]",
    ],
    "resnet18": [
        "model=resnet18",
        "model.kwargs.width=8",
        "model.kwargs.blocks_per_stage=1",
        "model.kwargs.num_classes=10",
        "model.inputs=[{shape:[1,3,32,32]}]",
    ],
    "llm": [
        "model=llm",
        "model.kwargs.vocab_size=64",
        "model.kwargs.dim=32",
        "model.kwargs.layers=1",
        "model.kwargs.hidden=64",
        "model.kwargs.seq_len=8",
        "model.inputs=[{shape:[1,8],dtype:int64,high:64}]",
    ],
    "mlp": ["model=mlp"],
    "outlier_mlp": ["model=outlier_mlp"],
    "cond_model": ["model=cond_model"],
    "topk_model": ["model=topk_model"],
    "three_inputs": ["model=three_inputs"],
}
ZOO_MODELS = sorted(TINY_MODEL_OVERRIDES)


def compose_config(tmp_path: Path, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose conf/config.yaml with overrides; artifacts, cache and MLflow store in tmp_path.
    Timed executions are counted, never budgeted by time (`runtime.max_time_s=null`), so a test
    sees the same runs whatever the machine's load; a test of the budget sets it again."""
    with initialize_config_module(version_base="1.3", config_module="conf"):
        cfg = compose(
            "config",
            overrides=[
                f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                f"cache_dir={tmp_path / 'cache'}",
                "runtime.max_time_s=null",
                *overrides,
            ],
        )
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    return cfg
