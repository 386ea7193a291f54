"""A Hugging Face causal LM as a cached decoder: `step` and `empty_caches` over its StaticCache.

transformers' own static cache (`StaticCache`, the one its ExecuTorch export integration uses)
keeps the cache in mutable buffers; here it is filled from the step's cache inputs (copies, so no
input is written to) and its updated tensors are returned, which gives the explicit inputs and
outputs every generation program here has (stages.export.generation).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def causal_lm(module: nn.Module) -> nn.Module | None:
    """The transformers causal LM in `module` (itself, or the zoo's `PositionalInputs` wrapper's
    model), or None when it is not one."""
    inner = getattr(module, "model", None) if not hasattr(module, "config") else module
    config = getattr(inner, "config", None)
    if inner is None or config is None or getattr(config, "is_encoder_decoder", False):
        return None
    embeddings: Any = getattr(inner, "get_output_embeddings", None)
    if not callable(embeddings):
        return None
    return inner if embeddings() is not None else None


def _cache_shape(config: Any, max_len: int) -> tuple[int, int, int, int]:
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    return (1, kv_heads, max_len, head_dim)


class HFCachedDecoder(nn.Module):
    """`step(tokens, input_pos, *caches) → (logits, *caches)` of a transformers causal LM."""

    def __init__(self, model: nn.Module, max_len: int) -> None:
        super().__init__()
        self.model = model
        self.max_len = max_len

    def empty_caches(self) -> list[tuple[str, torch.Tensor]]:
        """Zeroed key and value caches per layer, named `layers.<i>.k` / `.v`."""
        config: Any = self.model.config
        shape = _cache_shape(config, self.max_len)
        return [
            (f"layers.{i}.{kind}", torch.zeros(shape))
            for i in range(int(config.num_hidden_layers))
            for kind in ("k", "v")
        ]

    def step(
        self, tokens: torch.Tensor, input_pos: torch.Tensor, *caches: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        from transformers.cache_utils import StaticCache

        config: Any = self.model.config
        cache = StaticCache(config=config, max_cache_len=self.max_len)
        layers: list[Any] = list(cache.layers)
        for index, layer in enumerate(layers):
            keys, values = caches[2 * index], caches[2 * index + 1]
            layer.lazy_initialization(keys, values)
            layer.keys, layer.values = keys.clone(), values.clone()
            layer.cumulative_length = input_pos[0].clone()  # where this step's rows go
        out = self.model(
            input_ids=tokens,
            position_ids=input_pos[None],
            cache_position=input_pos,
            past_key_values=cache,
            use_cache=True,
        )
        updated = [t for layer in layers for t in (layer.keys, layer.values)]
        return (out.logits, *updated)
