"""A PT2E program's quantize parameters are named after the fp32 program's ops they were made
from, also for ops a higher-order op held at export (issue 44: a Hugging Face rotary block runs
under `wrap_with_set_grad_enabled`, so its ops' provenance root is that op, and the expected
error found no quantization for the rotary angle that PT2E rounds to int8 before cos/sin)."""

from __future__ import annotations

import pytest
import torch

from stages.formats.float_reference import activation_qparams


class Rotary(torch.nn.Module):
    """Angles from positions under no_grad (as Hugging Face's rotary embedding computes them)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            positions = torch.arange(x.shape[1]).float()
            angle = torch.cat([positions[:, None] * self.inv_freq] * 2, dim=-1)
            cos, sin = angle.cos(), angle.sin()
        return x * cos + x.flip(-1) * sin


def test_rotary_angle_quantization_is_named_after_the_fp32_ops() -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from stages.lower.executorch.precision import program_at_precision

    x = torch.randn(1, 12, 8, generator=torch.Generator().manual_seed(0))
    reference = torch.export.export(Rotary(), (x,)).run_decompositions({})  # as exported.pt2
    names = {n.name for n in reference.graph.nodes if n.op == "call_function"}
    assert {"cat", "cos", "sin"} <= names  # the fp32 program has them at top level
    fp32 = torch.export.export(Rotary(), (x,)).run_decompositions({})
    lowered = program_at_precision(fp32, "int8", [(x,)])

    by_root = activation_qparams(lowered)
    assert not {"cat", "cos", "sin"} & set(by_root)  # the old naming: all under the HOP's name
    named = activation_qparams(lowered, reference)
    assert {"cat", "cos", "sin"} <= set(named)
    scale, *_ = named["cat"]
    angle = max(float(v) for v in (torch.arange(12)[:, None] * Rotary().inv_freq).flatten())
    assert scale == pytest.approx(angle / 255, rel=0.05)  # the angle's range in int8 steps
