"""A tiny encoder block shaped like Hugging Face's (padding-masked attention, eval-mode dropout
after a projection): the patterns that made tapping an ExecuTorch XNNPACK program fail or
misfile (an elided op tapped as a pass-through; attention decomposed partly outside XNNPACK)."""

from __future__ import annotations

import torch
from torch import nn


class EncoderBlock(nn.Module):
    """Self-attention over 8 tokens of width 16 (2 heads) with a padding mask from the input,
    an output projection followed by dropout, and a residual add."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.ModuleList(nn.Linear(16, 16) for _ in range(3))
        self.out = nn.Linear(16, 16)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("first", torch.tensor([[1, 0, 0, 0, 0, 0, 0, 0]]))  # never all masked

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        q, k, v = (p(x).view(1, 8, 2, 8).transpose(1, 2) for p in self.qkv)
        mask = (keep + self.first).bool()[:, None, None, :].expand(1, 1, 8, 8)
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).reshape(1, 8, 16)
        return self.dropout(self.out(y)) + x


def make() -> nn.Module:
    """The block with seeded random weights, in eval mode."""
    torch.manual_seed(0)
    return EncoderBlock().eval()


INPUTS = "[{shape:[1,8,16]},{shape:[1,8],dtype:int64,high:2}]"
