"""Re-exporting the module PT2E converted (or made half): `torch.export`, retried with its views
as reshapes when a view no longer is one.

A graph exported from the user's model keeps `aten.view` where the model wrote `.view`, valid
for the strides the model had at export. Converting changes strides: PT2E's dequantize hands a
contiguous tensor to an op whose output layout follows its input's (Hugging Face T5's attention:
`scaled_dot_product_attention`, `transpose`, `.view`), so the view cannot be taken and the
re-export fails. A reshape computes the same values (a view where it can, a copy where it
cannot). Only a failed re-export is retried, so every program that re-exported before is
unchanged.
"""

from __future__ import annotations

from typing import Any

import torch


def views_as_reshapes(module: torch.nn.Module) -> int:
    """Retarget every `aten.view` of `module`'s graphs to `aten.reshape` in place; how many."""
    changed = 0
    for graph_module in module.modules():
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        found = 0
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.aten.view.default:
                node.target = torch.ops.aten.reshape.default
                found += 1
        if found:
            graph_module.recompile()
            changed += found
    return changed


def reexported(
    module: torch.nn.Module, sample: tuple[Any, ...], shapes: tuple[Any, ...] | None
) -> torch.export.ExportedProgram:
    """`torch.export.export(module, sample)`; if that fails and the module has views, once more
    with them as reshapes, the first error raised when that fails too."""
    try:
        return torch.export.export(module, sample, dynamic_shapes=shapes, strict=False)
    except (RuntimeError, ValueError) as first:
        if not views_as_reshapes(module):
            raise
        try:
            return torch.export.export(module, sample, dynamic_shapes=shapes, strict=False)
        except (RuntimeError, ValueError):
            raise first from None
