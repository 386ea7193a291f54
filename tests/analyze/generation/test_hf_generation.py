"""Hugging Face decoders generate (issue 37.1): llama- and gpt2-style from the zoo's configs, and
a user's own causal LM returned as it is by a `model=custom` factory; the cached program's
greedy tokens are the uncached model's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.handover.samples import load_samples
from tests.helpers.analyze_runs import read_summary
from tests.helpers.configs import compose_config

transformers = pytest.importorskip("transformers", reason="pip install -e '.[hf]'")

USER_FACTORY = """
import transformers


def make():
    config = transformers.Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )
    return transformers.Qwen2ForCausalLM(config).eval()
"""


def _generate(tmp_path: Path, *overrides: str) -> Path:
    cfg = compose_config(
        tmp_path,
        [
            "model=custom",
            "model.inputs=[{shape:[1,8],dtype:int64,high:128}]",
            "runtime.generate.prompt_tokens=4",
            "runtime.generate.new_tokens=3",
            "runtime.generate.max_len=8",
            "tracking=none",
            *overrides,
        ],
    )
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    run_pipeline(cfg, print_summary=False)
    return Path(cfg.run_dir)


def _uncached_greedy(model: torch.nn.Module, prompt: torch.Tensor, steps: int) -> list[int]:
    tokens, chosen = prompt, []
    with torch.no_grad():
        for _ in range(steps):
            token = int(model(input_ids=tokens).logits[0, -1].argmax())
            chosen.append(token)
            tokens = torch.cat([tokens, torch.tensor([[token]])], dim=1)
    return chosen


def _check(run_dir: Path, model: torch.nn.Module) -> None:
    summary = read_summary(run_dir)
    generation = summary["generation"]
    assert summary["verdict"] == "pass", generation["first_divergence"]
    assert [s["status"] for s in generation["steps"]] == ["pass"] * 4
    assert len(generation["kv_cache"]) == 4 * 2  # every step, both layers
    prompt = load_samples(run_dir / "inputs.pt")[0][0]
    generated = load_samples(run_dir / "run_outputs.pt")[0][0][0].tolist()
    assert generated == _uncached_greedy(model, prompt, 4)


@pytest.mark.parametrize(
    ("arch", "layers_key"), [("llama", "num_hidden_layers"), ("gpt2", "n_layer")]
)
def test_zoo_hf_decoders_generate(tmp_path: Path, arch: str, layers_key: str) -> None:
    from stages.export.zoo.hf import make

    run_dir = _generate(
        tmp_path,
        "model._target_=stages.export.zoo.hf.make",
        f"model.kwargs.arch={arch}",
        f"model.kwargs.{layers_key}=2",
        "backend=xnnpack",
    )
    torch.manual_seed(0)  # the export stage's seed: the same random weights
    _check(run_dir, make(arch, **{layers_key: 2}).model)


def test_a_users_own_causal_lm_generates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_lm.py").write_text(USER_FACTORY)
    monkeypatch.chdir(tmp_path)
    run_dir = _generate(tmp_path, "model._target_=./my_lm.py:make", "backend=qnn")
    import importlib.util

    spec = importlib.util.spec_from_file_location("my_lm", tmp_path / "my_lm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    _check(run_dir, module.make())
