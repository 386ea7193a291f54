"""Generation runs of a small zoo llm (dim 32, 2 layers, vocab 64, cache 16) sharing one stage
cache, so the program is exported once per prompt length."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from tests.helpers.analyze_runs import RunTiny
from tests.helpers.configs import compose_config

SMALL_LLM = [
    "model=llm",
    "model.kwargs.vocab_size=64",
    "model.kwargs.dim=32",
    "model.kwargs.layers=2",
    "model.kwargs.heads=4",
    "model.kwargs.kv_heads=2",
    "model.kwargs.hidden=64",
    "model.kwargs.seq_len=16",
    "model.inputs=[{shape:[1,16],dtype:int64,high:64}]",
    "runtime.generate.prompt_tokens=5",
]


@pytest.fixture(scope="session")
def run_generation(tmp_path_factory: pytest.TempPathFactory) -> RunTiny:
    """run_generation(label, *overrides) -> run dir of a finished generation of the small llm."""
    root = tmp_path_factory.mktemp("generation_runs")
    cache = root / "cache"

    def _run(label: str, *overrides: str) -> Path:
        cfg = compose_config(
            root / label, [*SMALL_LLM, "tracking=none", f"cache_dir={cache}", *overrides]
        )
        with open_dict(cfg):
            cfg.run_dir = str(root / label / "run")
        run_pipeline(cfg, print_summary=False)
        return Path(cfg.run_dir)

    return _run
