"""The forms (shape, float-ness) each debug handle's ops can log, static or symbolic."""

from __future__ import annotations

import torch

from stages.analyze.link.logged_shapes import ANY_FORM, handle_forms
from stages.handles.debug_handles import DEBUG_HANDLE_META


def _numbered(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    ops = [n for n in program.graph_module.graph.nodes if n.op == "call_function"]
    for handle, node in enumerate(ops, start=1):
        node.meta[DEBUG_HANDLE_META] = handle
    return program


def test_static_shapes_are_their_forms_and_symbolic_ones_match_any_logged_shape() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    static = _numbered(torch.export.export(model, (torch.randn(2, 4),)))
    static_forms = handle_forms(static)
    assert static_forms and all(f == {((2, 3), True)} for f in static_forms.values()), static_forms
    tokens = torch.export.Dim("tokens", min=2, max=16)
    dynamic = _numbered(
        torch.export.export(model, (torch.randn(5, 4),), dynamic_shapes=({0: tokens},))
    )
    forms = handle_forms(dynamic)  # a symbolic dimension: no error, any shape may be its own
    assert forms and all(f == {ANY_FORM} for f in forms.values()), forms
