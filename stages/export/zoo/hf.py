"""Hugging Face `transformers` architectures from small configs, random weights, nothing downloaded.

    python -m pipeline model=custom model._target_=stages.export.zoo.hf.make \\
        model.kwargs.arch=llama 'model.inputs=[{shape:[1,8],dtype:int64,high:128}]'

Any config field can be overridden as `model.kwargs.NAME=VALUE` (e.g. `model.kwargs.hidden_size=64`).
Needs the `hf` extra: `pip install -e '.[hf]'`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from stages.export.model_target import ModelConfigError

_TEXT = {"vocab_size": 128, "max_position_embeddings": 64}
_HIDDEN = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}


@dataclass(frozen=True)
class Architecture:
    """Which transformers classes to build, their tiny config, and the forward's input names."""

    config_class: str
    model_class: str
    config: dict[str, Any]
    inputs: tuple[str, ...]
    example_inputs: str  # the model.inputs override that fits the tiny config


ARCHITECTURES: dict[str, Architecture] = {
    "bert": Architecture(
        "BertConfig",
        "BertModel",
        {**_TEXT, **_HIDDEN, "intermediate_size": 64},
        ("input_ids", "attention_mask"),
        "[{shape:[1,8],dtype:int64,high:128},{shape:[1,8],dtype:int64,high:2}]",
    ),
    "gpt2": Architecture(
        "GPT2Config",
        "GPT2LMHeadModel",
        {"vocab_size": 128, "n_positions": 64, "n_embd": 32, "n_layer": 1, "n_head": 2},
        ("input_ids",),
        "[{shape:[1,8],dtype:int64,high:128}]",
    ),
    "llama": Architecture(
        "LlamaConfig",
        "LlamaForCausalLM",
        {**_TEXT, **_HIDDEN, "num_attention_heads": 4, "num_key_value_heads": 2},
        ("input_ids",),
        "[{shape:[1,8],dtype:int64,high:128}]",
    ),
    "t5": Architecture(
        "T5Config",
        "T5ForConditionalGeneration",
        {
            "vocab_size": 128,
            "d_model": 32,
            "d_kv": 16,
            "d_ff": 64,
            "num_layers": 1,
            "num_decoder_layers": 1,
            "num_heads": 2,
            "relative_attention_num_buckets": 8,
        },
        ("input_ids", "decoder_input_ids"),
        "[{shape:[1,8],dtype:int64,high:128},{shape:[1,4],dtype:int64,high:128}]",
    ),
    "whisper_encoder": Architecture(
        "WhisperConfig",
        "WhisperEncoder",
        {
            "num_mel_bins": 16,
            "d_model": 32,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "max_source_positions": 16,
        },
        ("input_features",),
        "[{shape:[1,16,32]}]",
    ),
    "vit": Architecture(
        "ViTConfig",
        "ViTForImageClassification",
        {**_HIDDEN, "intermediate_size": 64, "image_size": 32, "patch_size": 8, "num_labels": 10},
        ("pixel_values",),
        "[{shape:[1,3,32,32]}]",
    ),
    "convnext": Architecture(
        "ConvNextConfig",
        "ConvNextForImageClassification",
        {
            "num_channels": 3,
            "hidden_sizes": [8, 16],
            "depths": [1, 1],
            "num_stages": 2,
            "image_size": 32,
            "num_labels": 10,
        },
        ("pixel_values",),
        "[{shape:[1,3,32,32]}]",
    ),
    "qwen2": Architecture(
        "Qwen2Config",
        "Qwen2ForCausalLM",
        {
            **_TEXT,
            **_HIDDEN,
            "intermediate_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
        },
        ("input_ids",),
        "[{shape:[1,8],dtype:int64,high:128}]",
    ),
}


class PositionalInputs(nn.Module):
    """Calls a transformers model with the pipeline's positional inputs as named arguments."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.model(**dict(zip(self.names, inputs, strict=True)))


def _transformers() -> Any:
    try:
        return importlib.import_module("transformers")
    except ImportError as exc:
        raise ModelConfigError(
            "stages.export.zoo.hf needs Hugging Face transformers: pip install -e '.[hf]'"
        ) from exc


def _model_class(library: Any, name: str) -> Any:
    found = getattr(library, name, None)
    if found is None and name == "WhisperEncoder":
        found = importlib.import_module(
            "transformers.models.whisper.modeling_whisper"
        ).WhisperEncoder
    return found


def make(arch: str = "bert", **config_overrides: Any) -> nn.Module:
    """A randomly initialised `arch` (one of ARCHITECTURES) from its tiny config + overrides."""
    if arch not in ARCHITECTURES:
        raise ModelConfigError(
            f"model.kwargs.arch={arch!r} is not a known architecture; choose one of "
            f"{', '.join(sorted(ARCHITECTURES))}"
        )
    spec = ARCHITECTURES[arch]
    library = _transformers()
    settings = {**spec.config, "use_cache": False, **config_overrides}
    try:
        config = getattr(library, spec.config_class)(**settings)
    except (TypeError, ValueError) as exc:
        raise ModelConfigError(f"model.kwargs for arch={arch}: {exc}") from exc
    model = _model_class(library, spec.model_class)(config)
    return PositionalInputs(model.eval(), spec.inputs)
