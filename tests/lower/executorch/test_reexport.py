"""Re-exporting a converted module whose view is no longer a view (T5's attention after PT2E):
retried with reshapes; a module that re-exports as it is stays unchanged."""

from __future__ import annotations

import re

import pytest
import torch

from stages.lower.executorch.reexport import reexported, views_as_reshapes

aten = torch.ops.aten


def _transpose_then_view(columns: int) -> torch.fx.GraphModule:
    """x (2, 3, 4) → transpose(1, 2) → view(2, columns): the pattern PT2E's convert leaves in
    T5's attention, where the transposed tensor lost the layout that made it viewable."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    transposed = graph.call_function(aten.transpose.int, (x, 1, 2))
    graph.output(graph.call_function(aten.view.default, (transposed, [2, columns])))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _targets(program: torch.export.ExportedProgram) -> list[str]:
    return [str(n.target) for n in program.graph_module.graph.nodes if n.op == "call_function"]


def test_a_view_that_is_no_view_is_exported_as_a_reshape() -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    with pytest.raises((RuntimeError, ValueError), match="view"):
        torch.export.export(_transpose_then_view(12), (x,), strict=False)  # the failure
    program = reexported(_transpose_then_view(12), (x,), None)
    assert torch.equal(program.module()(x), x.transpose(1, 2).reshape(2, 12))


def test_a_module_that_exports_keeps_its_views() -> None:
    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 2))
    x = torch.randn(2, 3, 4)
    plain = torch.export.export(module, (x,), strict=False)
    again = reexported(plain.module(), (x,), None)
    assert _targets(again) == _targets(plain)
    assert "aten.reshape.default" not in _targets(again)


def test_a_failure_views_do_not_explain_is_the_first_error() -> None:
    x = torch.randn(2, 3, 4)
    with pytest.raises((RuntimeError, ValueError)) as first:
        torch.export.export(_transpose_then_view(5), (x,), strict=False)
    with pytest.raises(type(first.value), match=re.escape(str(first.value).splitlines()[0])) as got:
        reexported(_transpose_then_view(5), (x,), None)  # 24 values are no (2, 5)
    assert "aten.view.default" in str(got.value)  # the first attempt's error, not the retry's


def test_views_are_counted_and_retargeted() -> None:
    module = _transpose_then_view(12)
    assert views_as_reshapes(module) == 1
    assert aten.reshape.default in {n.target for n in module.graph.nodes}
    assert views_as_reshapes(module) == 0
