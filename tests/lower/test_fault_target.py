"""Fault targets (issue 14.3): one node per name, and warnings for faults that change nothing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from stages.lower.fault_target import (
    AmbiguousFaultTargetError,
    no_op_warnings,
    resolve_fault_node,
)


class _Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        branch = torch.cond(y.sum() > 0, lambda t: t.relu(), lambda t: t.neg().relu(), (y,))
        return branch, y > 0


def _graph() -> torch.fx.GraphModule:
    return torch.export.export(_Head(), (torch.randn(2, 4),)).graph_module


def _fault(node: str, kind: str = "scale") -> dict[str, object]:
    return {"node": node, "debug_handle": None, "kind": kind, "value": 1.5}


def test_a_size_one_last_dim_transpose_and_a_bool_output_change_nothing() -> None:
    gm = _graph()
    (transpose,) = no_op_warnings(gm, _fault("linear", "transpose"))
    assert "kind=transpose of an output of shape [2, 1] leaves it as it is" in transpose
    assert no_op_warnings(gm, _fault("linear", "scale")) == []
    (bool_out,) = no_op_warnings(gm, _fault("gt_1"))
    assert "its output is bool" in bool_out
    assert no_op_warnings(gm, _fault("gt_1", "transpose")) == [
        "the fault on gt_1 changes nothing: kind=transpose of an output of shape [2, 1] leaves "
        "it as it is"
    ]


def test_a_name_in_both_branches_is_refused_and_a_qualified_name_resolves() -> None:
    gm = _graph()
    with pytest.raises(AmbiguousFaultTargetError, match=r"relu matches 2 nodes: true_graph_0"):
        resolve_fault_node(gm, _fault("relu"))
    assert resolve_fault_node(gm, _fault("linear")) == _fault("linear")
    resolved = resolve_fault_node(gm, _fault("false_graph_0.relu"))
    assert resolved["node"] is None and resolved["qualified_node"] == "false_graph_0.relu"
