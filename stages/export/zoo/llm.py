"""A small decoder-only LLM: RMSNorm, RoPE, SwiGLU, grouped-query attention, fixed length.

`TinyLLM.forward` is one fixed-length forward; `TinyLLM.step` is one generation step with a static
KV cache passed in and returned (`stages.export.generation` exports it for prefill and decode)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned scale."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rope_tables(
    seq_len: int, head_dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq_len).float(), inv_freq)
    return angles.cos(), angles.sin()


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


class CachedStep(nn.Module):
    """A module run two ways: `full(x)` over the fixed-length sequence, or, given `input_pos`
    and the caches, `step(x, input_pos, k_cache, v_cache)` returning (out, k_cache, v_cache)."""

    def forward(
        self,
        x: torch.Tensor,
        input_pos: torch.Tensor | None = None,
        k_cache: torch.Tensor | None = None,
        v_cache: torch.Tensor | None = None,
    ) -> Any:
        if input_pos is not None and k_cache is not None and v_cache is not None:
            return self.step(x, input_pos, k_cache, v_cache)
        return self.full(x)

    def full(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def step(
        self, x: torch.Tensor, input_pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError


class GQAttention(CachedStep):
    """Causal attention where groups of query heads share key/value heads."""

    def __init__(self, dim: int, heads: int, kv_heads: int, seq_len: int) -> None:
        super().__init__()
        if heads % kv_heads or dim % heads:
            raise ValueError(
                f"llm: heads={heads} must be a multiple of kv_heads={kv_heads} and divide dim={dim}"
            )
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        cos, sin = _rope_tables(seq_len, self.head_dim)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer(
            "mask", torch.full((seq_len, seq_len), float("-inf")).triu(1), persistent=False
        )

    def full(self, x: torch.Tensor) -> torch.Tensor:
        """Fixed-length causal attention."""
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.get_buffer("cos"), self.get_buffer("sin")
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        scores = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5 + self.mask
        out = scores.softmax(-1) @ v
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))

    def step(
        self, x: torch.Tensor, input_pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Attention of the tokens at `input_pos` over the cache they are written into; the
        output and the updated caches ([batch, kv_heads, max_len, head_dim])."""
        b = x.shape[0]
        q = self.wq(x).view(b, -1, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, -1, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, -1, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.get_buffer("cos")[input_pos], self.get_buffer("sin")[input_pos]
        q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)
        k_cache = k_cache.index_copy(
            2, input_pos, k
        )  # the cache update: new rows at their position
        v_cache = v_cache.index_copy(2, input_pos, v)
        repeat = self.heads // self.kv_heads
        keys = k_cache.repeat_interleave(repeat, dim=1)
        values = v_cache.repeat_interleave(repeat, dim=1)
        mask = self.get_buffer("mask")[input_pos]  # a query sees cache rows up to its position
        scores = (q @ keys.transpose(-2, -1)) * self.head_dim**-0.5 + mask
        out = scores.softmax(-1) @ values
        return (
            self.wo(out.transpose(1, 2).reshape(b, -1, self.heads * self.head_dim)),
            k_cache,
            v_cache,
        )


class SwiGLU(nn.Module):
    """Gated feed-forward: silu(x W1) * (x W3), then W2."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class DecoderLayer(CachedStep):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int, seq_len: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = GQAttention(dim, heads, kv_heads, seq_len)
        self.ffn_norm = RMSNorm(dim)
        self.ffn = SwiGLU(dim, hidden)

    def full(self, x: torch.Tensor) -> torch.Tensor:
        """The fixed-length layer."""
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))

    def step(
        self, x: torch.Tensor, input_pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        attended, k_cache, v_cache = self.attn(self.attn_norm(x), input_pos, k_cache, v_cache)
        x = x + attended
        return x + self.ffn(self.ffn_norm(x)), k_cache, v_cache


class TinyLLM(nn.Module):
    """Token ids [batch, seq_len] (int64) → logits [batch, seq_len, vocab]."""

    def __init__(
        self,
        vocab_size: int = 512,
        dim: int = 128,
        layers: int = 2,
        heads: int = 4,
        kv_heads: int = 2,
        hidden: int = 256,
        seq_len: int = 32,
    ) -> None:
        super().__init__()
        self.max_len, self.kv_heads, self.head_dim = seq_len, kv_heads, dim // heads
        self.embed = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(
            DecoderLayer(dim, heads, kv_heads, hidden, seq_len) for _ in range(layers)
        )
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))

    def step(
        self, tokens: torch.Tensor, input_pos: torch.Tensor, *caches: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Token ids [batch, n] at positions `input_pos` [n], and per layer its key and value
        cache → logits [batch, n, vocab] and the updated caches, in the same order."""
        x = self.embed(tokens)
        updated: list[torch.Tensor] = []
        for index, layer in enumerate(self.layers):
            x, k_cache, v_cache = layer(x, input_pos, caches[2 * index], caches[2 * index + 1])
            updated += [k_cache, v_cache]
        return (self.lm_head(self.norm(x)), *updated)

    def empty_caches(self, batch: int = 1) -> list[tuple[str, torch.Tensor]]:
        """Zeroed caches by name (`layers.<i>.k`, `layers.<i>.v`), in `step`'s order."""
        shape = (batch, self.kv_heads, self.max_len, self.head_dim)
        return [
            (f"layers.{i}.{kind}", torch.zeros(shape))
            for i in range(len(self.layers))
            for kind in ("k", "v")
        ]


def build_llm(**kwargs: object) -> TinyLLM:
    return TinyLLM(**kwargs)  # type: ignore[arg-type]
