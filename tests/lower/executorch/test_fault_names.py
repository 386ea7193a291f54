"""A fault op inserted before the fp16/int8 re-export must not shift the names of the ops after
it: the analysis matches the lowered program's ops to the fp32 program's by name. (On the tiny
ViT at fp16 a fault on linear_3 made the analysis refuse the run: "its op mul_2 has no such op
there".) No ExecuTorch needed: the fp16 re-export is torch.export's."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from stages.export.exporter import export_model
from stages.lower.executorch.fault import insert_fault, name_fault_ops
from stages.lower.executorch.precision import program_at_precision


class _Muls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x) * 2.0
        return self.b(h) * 3.0 + h * 0.5


def _ops(program: torch.export.ExportedProgram) -> list[tuple[str, str]]:
    return [
        (n.name, str(n.target))
        for n in program.graph.nodes
        if n.op == "call_function" and not n.name.startswith("injected_fault_")
    ]


def test_ops_after_the_fault_keep_their_names_through_the_fp16_re_export(tmp_path: Path) -> None:
    sample = (torch.randn(2, 8),)
    program = export_model(
        _Muls(), sample, strict=False, decompose=False, model_name="m", error_log=tmp_path / "e"
    )
    before = _ops(program)
    faulted = insert_fault(program, "linear", "scale", 1.5)
    half = name_fault_ops(program_at_precision(faulted, "fp16", [sample]))
    names = [n.name for n in half.graph.nodes if n.op == "call_function"]
    assert "injected_fault_scale_linear" in names
    after = dict(_ops(half))
    assert all(after.get(name) == target for name, target in before), (before, after)
    (out,) = half.module()(sample[0].half())
    assert out.dtype == torch.float16 and out.shape == (2, 8)  # the renamed graph still runs
