"""Tap points of a faulted program: the fault op's value is its target's, filed under the
target (an int8 conv's fault was named at the op after it while the conv's tap read the value
before the fault)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from stages.lower.executorch.tap_points import TapPoint, _faults_onto_targets


def _program() -> SimpleNamespace:
    """x -> conv2d -> injected_fault_scale_conv2d -> relu, and a step gate op beside them."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    conv = graph.call_function(torch.relu, (x,))
    conv.name = "conv2d"
    fault = graph.call_function(torch.mul, (conv, 1.5))
    fault.name = "injected_fault_scale_conv2d"
    relu = graph.call_function(torch.relu, (fault,))
    relu.name = "relu"
    gate = graph.call_function(torch.mul, (x, 0.0))
    gate.name = "injected_fault_gate_7_conv2d"
    graph.output((relu, gate))
    return SimpleNamespace(
        exported_program=SimpleNamespace(graph_module=SimpleNamespace(graph=graph))
    )


def _point(source: str, ops: tuple[str, ...], handles: tuple[int, ...]) -> TapPoint:
    return TapPoint(source, ops, handles, 5, "torch.float32", (1,))


def test_the_fault_tap_is_filed_under_its_target_and_the_clean_value_is_not_tapped() -> None:
    points = [
        _point("conv2d", ("conv2d",), (1,)),
        _point("injected_fault_scale_conv2d", ("injected_fault_scale_conv2d", "relu"), (2, 3)),
        _point("injected_fault_gate_7_conv2d", ("injected_fault_gate_7_conv2d",), (4,)),
    ]
    moved = _faults_onto_targets(points, _program())
    assert [(p.source, p.ops, p.handles) for p in moved] == [
        ("injected_fault_scale_conv2d", ("conv2d", "relu"), (1, 2, 3)),
        ("injected_fault_gate_7_conv2d", ("injected_fault_gate_7_conv2d",), (4,)),
    ]


def test_a_program_without_faults_keeps_its_points() -> None:
    points = [_point("conv2d", ("conv2d",), (1,)), _point("relu", ("relu",), (3,))]
    assert _faults_onto_targets(points, _program()) == points
