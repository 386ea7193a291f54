"""Random small graphs from an op catalog, for the property-based pipeline test (issue 12.5).

A graph is a JSON-able spec: feature tensors of shape [1, C, N] in a pool (the float inputs, an
embedding of an optional integer token input), steps that each read one or two pool tensors and
append one, and outputs. Index ops (sort/topk/argmax) also give integer outputs.
`make_graph(spec=json)` builds the nn.Module; `graph_specs()` is the hypothesis strategy.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

ACTIVATIONS = ("gelu", "silu", "hardswish", "relu", "sigmoid", "tanh")
BINARY = ("add", "mul", "sub", "div")
REDUCE = ("mean", "sum", "amax")
OPS = (
    "conv1d",
    "conv2d",
    "linear",
    "matmul",
    "bmm",
    "layer_norm",
    "batch_norm",
    "group_norm",
    "softmax",
    "act",
    "binary",
    "residual",
    "cat_chunk",
    "stack",
    "split",
    "slice",
    "index",
    "permute_reshape",
    "view",
    "reduce",
    "sort",
    "topk",
    "argmax",
    "where",
    "masked_fill",
    "embedding",
    "cond",
    "buffer",
    "buffer_update",
)
VOCAB = 16


def _groups(choice: int, channels: int) -> int:
    return (1, 2, channels)[choice % 3]  # dense, grouped, depthwise


class RandomGraph(nn.Module):
    """The module a spec describes (weights: PyTorch's default init under the pipeline's seed)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.spec = spec
        c, n = spec["channels"], spec["length"]
        self.layers = nn.ModuleDict()
        for index, step in enumerate(spec["steps"]):
            layer = self._layer(step, c, n)
            if layer is not None:
                self.layers[str(index)] = layer
        self.register_buffer("perm", torch.randperm(c))
        self.register_buffer("state", torch.zeros(1, c, n))
        self.register_buffer("bias", torch.randn(1, c, n))
        self.embed = nn.Embedding(VOCAB, c) if spec["tokens"] else None

    @staticmethod
    def _layer(step: dict[str, Any], c: int, n: int) -> nn.Module | None:
        op, p = step["op"], step["p"]
        if op in ("conv1d", "residual"):
            return nn.Conv1d(c, c, 3, padding=1, groups=_groups(p, c))
        if op == "conv2d":
            return nn.Conv2d(c, c, 3, padding=1, groups=_groups(p, c))
        if op in ("linear", "matmul"):
            return nn.Linear(n, n, bias=op == "linear")
        if op == "layer_norm":
            return nn.LayerNorm(n)
        if op == "batch_norm":
            norm = nn.BatchNorm1d(c)
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.5, 2.0)
            return norm
        if op == "group_norm":
            return nn.GroupNorm(2, c)
        return None

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        spec = self.spec
        pool = [x for x in inputs if x.is_floating_point()]
        if self.embed is not None:
            pool.append(self.embed(inputs[-1]).permute(0, 2, 1))
        extras: list[torch.Tensor] = []
        for index, step in enumerate(spec["steps"]):
            a, b = pool[step["a"] % len(pool)], pool[step["b"] % len(pool)]
            pool.append(self._step(index, step, a, b, extras))
        outputs = [pool[i % len(pool)] for i in spec["outputs"]]
        return (*outputs, pool[-1], *extras)

    def _step(
        self, index: int, step: dict[str, Any], a: torch.Tensor, b: torch.Tensor, extras: list
    ) -> torch.Tensor:
        op, p = step["op"], step["p"]
        c, n = self.spec["channels"], self.spec["length"]
        layer = getattr(self.layers, str(index), None)
        if op == "conv2d" and layer is not None:
            return layer(a.reshape(1, c, 2, n // 2)).reshape(1, c, n)
        if op == "residual" and layer is not None:
            return a + F.relu(layer(a))
        if op == "matmul" and isinstance(layer, nn.Linear):
            return torch.matmul(a, layer.weight)
        if layer is not None:
            return layer(a)
        if op == "bmm":
            return torch.bmm(torch.bmm(a, b.transpose(1, 2)).softmax(-1), b)
        if op == "softmax":
            return a.softmax(-1)
        if op == "act":
            return getattr(F, ACTIVATIONS[p % len(ACTIVATIONS)])(a)
        if op == "binary":
            return self._binary(BINARY[p % 4], a, b if p % 8 < 4 else b.mean(-1, keepdim=True))
        if op == "cat_chunk":
            first, second = torch.cat([a, b], 1).chunk(2, 1)
            return first * second
        if op == "stack":
            return torch.stack([a, b], 0).amax(0)
        if op == "split":
            left, right = a.split([n // 2, n - n // 2], -1)
            return torch.cat([right, left], -1)
        return self._shape_or_select(op, p, a, b, extras)

    @staticmethod
    def _binary(kind: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if kind == "add":
            return a + b
        if kind == "mul":
            return a * b
        if kind == "sub":
            return a - b
        return a / (b.abs() + 1.0)

    def _shape_or_select(
        self, op: str, p: int, a: torch.Tensor, b: torch.Tensor, extras: list
    ) -> torch.Tensor:
        c, n = self.spec["channels"], self.spec["length"]
        if op == "slice":
            return torch.cat([a[:, :, 1:], a[:, :, :1]], -1)
        if op == "index":
            return a[:, self.perm]
        if op == "permute_reshape":
            return a.permute(0, 2, 1).reshape(1, c, n)
        if op == "view":
            return a.contiguous().view(1, n, c).transpose(1, 2) * 0.5 + a
        if op == "reduce":
            return a - getattr(a, REDUCE[p % 3])(-1, keepdim=True)
        if op == "sort":
            values, indices = a.sort(-1, descending=p % 2 == 1)
            extras.append(indices)
            return values
        if op == "topk":
            values, indices = a.topk(n // 2, -1)
            extras.append(indices)
            return torch.cat([values, values * 0.5], -1)
        if op == "argmax":
            best = a.argmax(-1)
            extras.append(best)
            return a - torch.gather(a, -1, best.unsqueeze(-1))
        if op == "where":
            return torch.where(a > 0, a, b * 0.5)
        if op == "masked_fill":
            return a.masked_fill(a < -0.5, 0.0)
        if op == "embedding" and self.embed is not None:
            return a + self.embed(a.argmax(1).clamp(max=VOCAB - 1)).permute(0, 2, 1)
        if op == "cond":
            return torch.cond(a.sum() > 0, lambda t: t.sin(), lambda t: t.cos() * 2.0, (a,))
        if op == "buffer":
            return a * self.bias
        if op == "buffer_update":
            self.state.mul_(0.5).add_(a)
            return self.state + b
        return a.neg()


def make_graph(spec: str) -> nn.Module:
    """The factory the pipeline calls: `model.kwargs.spec` is the spec as JSON."""
    return RandomGraph(json.loads(spec))


def model_inputs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The `model.inputs` entries for a spec: the float inputs, then the tokens if any."""
    shape = [1, spec["channels"], spec["length"]]
    inputs: list[dict[str, Any]] = [{"shape": shape} for _ in range(spec["float_inputs"])]
    if spec["tokens"]:
        inputs.append({"shape": [1, spec["length"]], "dtype": "int64", "high": VOCAB})
    return inputs


@st.composite
def graph_specs(draw: st.DrawFn, max_steps: int = 8) -> dict[str, Any]:
    """A random graph: 1-3 float inputs, maybe tokens, 1..max_steps ops, 1-3 outputs."""
    steps = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "op": st.sampled_from(OPS),
                    "a": st.integers(0, 15),
                    "b": st.integers(0, 15),
                    "p": st.integers(0, 23),
                }
            ),
            min_size=1,
            max_size=max_steps,
        )
    )
    return {
        "channels": draw(st.sampled_from([4, 8])),
        "length": draw(st.sampled_from([4, 8])),
        "float_inputs": draw(st.integers(1, 3)),
        "tokens": draw(st.booleans()),
        "steps": steps,
        "outputs": draw(st.lists(st.integers(0, 15), min_size=0, max_size=2)),
    }
