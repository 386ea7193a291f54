"""A decoder exported for generation: one program for prefill and decode, with a static KV cache.

The cache is explicit inputs and outputs (as ExecuTorch's static attention for NPU backends
passes it), not mutable buffers: every execution is then a pure function of its inputs, so the
ETRecord's reference program can be run on any step's own inputs, and the run stage can repeat a
step to capture its intermediate outputs. The token count is a dynamic dimension, so the prefill
(the whole prompt) and each decode step (one token) run the same program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim, ExportedProgram

from stages.export.config import InputsConfig, ModelConfig
from stages.export.exporter import export_model
from stages.export.hf_generation import HFCachedDecoder, causal_lm
from stages.formats.generation_signature import GenerationSignature, check_length

Sample = tuple[torch.Tensor, ...]


class GenerationError(ValueError):
    """A model or option that cannot generate; the message names the option and the fix."""


class GenerationStep(nn.Module):
    """`forward(tokens, input_pos, *caches)` is the decoder's `step`: logits, then the caches."""

    def __init__(self, decoder: nn.Module) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(
        self, tokens: torch.Tensor, input_pos: torch.Tensor, *caches: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        step: Any = self.decoder.step
        return tuple(step(tokens, input_pos, *caches))


def cached_decoder(module: nn.Module, model_name: str, max_len: int | None) -> nn.Module:
    """The module itself when it has a cached `step` (the zoo llm), a Hugging Face causal LM
    over its static cache, or a clear refusal."""
    if callable(getattr(module, "step", None)) and callable(getattr(module, "empty_caches", None)):
        return module
    hf = causal_lm(module)
    if hf is not None:
        config: Any = hf.config
        length = max_len or int(
            getattr(config, "max_position_embeddings", 0) or getattr(config, "n_positions", 0)
        )
        if length < 1:
            raise GenerationError(
                f"model '{model_name}': give the KV cache's length as runtime.generate.max_len"
            )
        return HFCachedDecoder(hf, length)
    raise GenerationError(
        f"model '{model_name}' ({type(module).__name__}) has no cached decode step: "
        "runtime.generate.* needs a Hugging Face causal LM, or a decoder with "
        "`step(tokens, input_pos, *caches)` and `empty_caches()` (as the zoo `llm`)"
    )


def _caches(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    empty: Any = module.empty_caches
    return list(empty())


def prompt_sample(
    model: ModelConfig, inputs: InputsConfig, caches: list[torch.Tensor], prompt: int
) -> Sample:
    """The prefill's inputs: `prompt` seeded token ids from `[0, model.inputs[0].high)`, their
    positions and the empty caches."""
    high = max(int(model.inputs[0].high), 1) if model.inputs else 2
    generator = torch.Generator().manual_seed(inputs.seed)
    tokens = torch.randint(0, high, (1, prompt), generator=generator, dtype=torch.int64)
    return (tokens, torch.arange(prompt, dtype=torch.int64), *caches)


def export_for_generation(
    module: nn.Module,
    model: ModelConfig,
    inputs: InputsConfig,
    prompt: int,
    *,
    strict: bool,
    error_log: Path,
    max_len: int | None = None,
) -> tuple[ExportedProgram, Sample, GenerationSignature]:
    """The step program (token count dynamic up to the cache length), the prefill sample and
    the generation signature; `prompt` is the prompt's length in tokens."""
    module = cached_decoder(module, model.name, max_len)
    named = _caches(module)
    max_len = int(named[0][1].shape[2]) if named else 0
    problem = check_length(prompt, 0, max_len, f"model '{model.name}'")
    if problem:
        raise GenerationError(problem)
    caches = [tensor for _, tensor in named]
    sample = prompt_sample(model, inputs, caches, prompt)
    # torch.export specializes a dimension of size 1: trace with two tokens when the prompt has one.
    example = sample if prompt > 1 else prompt_sample(model, inputs, caches, 2)
    tokens = Dim("tokens", min=1, max=max_len)
    dynamic: Any = ({1: tokens}, {0: tokens}, (None,) * len(caches))
    program = export_model(
        GenerationStep(module).eval(),
        example,
        strict=strict,
        decompose=False,
        model_name=model.name,
        error_log=error_log,
        dynamic_shapes=dynamic,
    )
    with torch.no_grad():
        vocab = int(GenerationStep(module)(*sample[:2], *caches)[0].shape[-1])
    signature = GenerationSignature(
        tuple(name for name, _ in named),
        max_len,
        prompt,
        vocab,
    )
    return program, sample, signature
