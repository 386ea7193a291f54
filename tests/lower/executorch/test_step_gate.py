"""`backend.fault.from_step` on executorch_* backends: the fault op's operand is gated on the
step's last position, so one program is clean before the step and faulty from it; the int8/fp16
re-export keeps a generation program's dynamic token count. Plain torch.export, no lowering."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

from stages.formats.float_reference import injected_faults
from stages.lower.executorch.fault import insert_fault
from stages.lower.executorch.precision import dynamic_shapes


class _CacheStep(nn.Module):
    """(tokens [1, n], input_pos [n], cache [8, 2]) → (out, cache): a cache update as an op."""

    def forward(
        self, tokens: torch.Tensor, input_pos: torch.Tensor, cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows = tokens[0].float()[:, None].expand(-1, 2)
        cache = cache.index_copy(0, input_pos, rows)
        return cache.sum(0, keepdim=True), cache


def _program() -> torch.export.ExportedProgram:
    n = Dim("tokens", min=1, max=8)
    sample = (torch.tensor([[1, 2, 3]]), torch.arange(3), torch.zeros(8, 2))
    return torch.export.export(
        _CacheStep(), sample, dynamic_shapes=({1: n}, {0: n}, None), strict=False
    )


def _step(module: nn.Module, positions: list[int]) -> torch.Tensor:
    tokens = torch.tensor([[5] * len(positions)])
    return module(tokens, torch.tensor(positions), torch.zeros(8, 2))[1]


@pytest.mark.parametrize("kind", ["offset", "scale", "nan"])
def test_the_fault_acts_from_the_gated_position_on(kind: str) -> None:
    clean = _program().module()
    faulted = insert_fault(_program(), "index_copy", kind, 0.5, from_position=3).module()
    for before in ([0, 1, 2], [2]):  # a prefill ending at 2, a decode step at 2
        assert torch.equal(_step(faulted, before), _step(clean, before))
    for after in ([3], [4], [1, 2, 3]):
        changed = _step(faulted, after)
        reference = _step(clean, after)
        if kind == "nan":
            assert torch.isnan(changed).all()
        else:
            expected = reference + 0.5 if kind == "offset" else reference * 0.5
            assert torch.allclose(changed, expected)


def test_gate_ops_are_filed_as_injected_not_as_faults() -> None:
    program = insert_fault(_program(), "index_copy", "offset", 0.5, from_position=3)
    assert injected_faults(program) == [{"kind": "offset", "node": "index_copy"}]
    gates = [n.name for n in program.graph_module.graph.nodes if "gate" in n.name]
    assert gates and all(n.startswith("injected_fault_gate_") for n in gates)


def test_re_export_keeps_the_dynamic_token_count() -> None:
    shapes = dynamic_shapes(_program())
    assert shapes is not None and shapes[2] is None
    assert shapes[0][1] is shapes[1][0]  # one symbol for tokens and input_pos
    assert (shapes[0][1].min, shapes[0][1].max) == (1, 8)
    static = torch.export.export(
        _CacheStep(), (torch.tensor([[1]]), torch.arange(1), torch.zeros(8, 2))
    )
    assert dynamic_shapes(static) is None
