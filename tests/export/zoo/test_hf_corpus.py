"""The corpus of Hugging Face architectures: every one builds from its small config and exports
with torch.export; its conf/model entry gives inputs it takes; a few run the whole pipeline on
ExecuTorch's XNNPACK at int8 with taps and pass."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from omegaconf import DictConfig

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded, even by accident
pytest.importorskip(
    "transformers", reason="needs Hugging Face transformers: pip install -e '.[hf]'"
)

from stages.export.model_target import ModelConfigError
from stages.export.zoo.batchnorm_statistics import batchnorms
from stages.export.zoo.hf_corpus import build
from stages.export.zoo.hf_corpus_specs import CORPUS, MODALITY_INPUTS
from tests.helpers.optional import require_executorch

CONF = Path(__file__).resolve().parents[3] / "conf" / "model"


@functools.cache
def _built(arch: str) -> torch.nn.Module:
    """Each architecture built once for the module's tests (they only read it)."""
    return build(arch)


def _input(arch: str) -> torch.Tensor:
    spec = MODALITY_INPUTS[CORPUS[arch].modality][0]
    generator = torch.Generator().manual_seed(3)
    if spec["dtype"] == "int64":
        return torch.randint(0, spec["high"], spec["shape"], generator=generator)
    return torch.randn(spec["shape"], generator=generator)


def test_the_corpus_holds_at_least_20_architectures_of_three_modalities() -> None:
    assert len(CORPUS) >= 20
    assert {spec.modality for spec in CORPUS.values()} == {"vision", "text", "audio"}


@pytest.mark.parametrize("arch", sorted(CORPUS))
def test_architecture_builds_and_exports_with_its_modalitys_inputs(arch: str) -> None:
    model = _built(arch)
    x = _input(arch)
    eager = model(x)
    program = torch.export.export(model, (x,), strict=False)
    exported = program.module()(x)
    assert isinstance(eager, torch.Tensor) and torch.isfinite(eager).all()
    torch.testing.assert_close(exported, eager, rtol=1e-4, atol=1e-5)
    assert sum(n.op == "call_function" for n in program.graph.nodes) > 20


@pytest.mark.parametrize("arch", sorted(a for a, s in CORPUS.items() if s.modality == "vision"))
def test_batchnorm_outputs_have_a_trained_networks_scale(arch: str) -> None:
    """After re-estimation every BatchNorm's output spreads like a trained one's (std ~ its
    affine weight, U(0.5, 1.5), and the spread of its channels' biases), however small the
    activations it normalises: not the ~1e-9 of a random init deep in the network."""
    model = _built(arch)
    spreads: list[float] = []
    hooks = [
        bn.register_forward_hook(lambda _m, _i, out: spreads.append(float(out.std())))
        for bn in batchnorms(model)
    ]
    with torch.no_grad():
        model(torch.randn(4, *MODALITY_INPUTS["vision"][0]["shape"][1:]))
    for hook in hooks:
        hook.remove()
    assert len(spreads) == len(hooks)
    assert all(0.1 < s < 10.0 for s in spreads), (arch, min(spreads, default=None), max(spreads))


def test_without_reestimation_efficientnets_activations_vanish() -> None:
    """What the re-estimation is for: Hugging Face's EfficientNet init draws BatchNorm weights
    at N(0, 0.02), so a block's output shrinks ~50x each time (int8 would quantize it to 0)."""
    transformers = pytest.importorskip("transformers")
    spec = CORPUS["efficientnet"]
    torch.manual_seed(0)
    config = transformers.EfficientNetConfig(**spec.config)
    raw = transformers.EfficientNetForImageClassification(config).eval()
    features = raw.efficientnet(torch.randn(1, 3, 64, 64)).last_hidden_state
    trunk = _built("efficientnet").get_submodule("model.efficientnet")
    built = trunk(torch.randn(1, 3, 64, 64)).last_hidden_state
    assert float(features.std()) < 1e-6 < 0.1 < float(built.std())


def test_an_unknown_architecture_is_refused_naming_the_option() -> None:
    with pytest.raises(ModelConfigError, match=r"model.kwargs.arch='resnett'.*resnet"):
        build("resnett")


@pytest.mark.parametrize("modality", sorted(MODALITY_INPUTS))
def test_each_modalitys_conf_entry_gives_the_corpus_inputs(modality: str) -> None:
    entry = yaml.safe_load((CONF / f"hf_{modality}.yaml").read_text())
    assert entry["_target_"] == "stages.export.zoo.hf_corpus.build"
    assert entry["inputs"] == MODALITY_INPUTS[modality]  # type: ignore[index]
    assert CORPUS[entry["kwargs"]["arch"]].modality == modality


# Chosen for what they bring at int8 on ExecuTorch's XNNPACK, small enough for the suite:
# BERT (one layer: attention with a padding mask, GELU, LayerNorm) and ResNet (conv + BatchNorm
# folded at int8, residual adds, max pool). benchmarks/bench_corpus.py runs the whole corpus.
END_TO_END = {
    "bert": ["model=hf_text", "model.kwargs.arch=bert", "+model.kwargs.num_hidden_layers=1"],
    "resnet": ["model=hf_vision", "model.kwargs.arch=resnet"],
}


@pytest.mark.executorch
@pytest.mark.parametrize("arch", sorted(END_TO_END))
def test_a_clean_int8_run_with_taps_on_executorch_passes(
    arch: str, make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    require_executorch()
    from tests.helpers.executorch_runs import run_on_executorch

    summary, gaps, _ = run_on_executorch(
        make_cfg,
        tmp_path / "run",
        tmp_path / "cache",
        *END_TO_END[arch],
        "backend.precision=int8",
        "runtime.observe=tap",
    )
    assert summary["verdict"] == "pass", (summary["verdict_reason"], summary["first_divergence"])
    assert summary["accuracy"]["met"], summary["accuracy"]
    assert summary["instrumentation"]["ops_with_rows"] > 10
    inside = [g for g in gaps if g["delegate_backend_name"]]  # rows of values inside partitions,
    assert len(inside) > 2 * summary["partitions"]  # not only each partition's output
