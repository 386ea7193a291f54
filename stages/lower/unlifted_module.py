"""An exported program as a runnable module (what PT2E and eager taps run), without torch's
unlifting turning a Python number in a Tensor slot into a float32 constant.

`ExportedProgram.module()` (torch 2.13) makes `aten.add.Tensor(arange, 0)` add a float32
`_tensor_constant`, so an int64 index becomes float and `aten.index` fails (Hugging Face BERT's
position ids at int8). Such calls on an integer tensor take their op's `.Scalar` overload, which
keeps the promotion rules (a Python number is a wrapped number in both overloads); float ops,
which a float constant does not promote, stay as exported, so what XNNPACK partitions is unchanged.
"""

from __future__ import annotations

import copy

import torch


def _scalar_overload(node: torch.fx.Node) -> torch._ops.OpOverload | None:
    """The `.Scalar` overload to call instead, when only the second operand is a number."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target._overloadname != "Tensor":
        return None
    schema = target._schema.arguments
    numbers = [
        i
        for i, (value, arg) in enumerate(zip(node.args, schema, strict=False))
        if isinstance(value, int | float) and str(arg.type) == "Tensor"
    ]
    value = getattr(node.args[0], "meta", {}).get("val") if node.args else None
    if numbers != [1] or not isinstance(value, torch.Tensor) or value.is_floating_point():
        return None  # a float operand is not promoted by a float constant: left as exported
    scalar = getattr(target.overloadpacket, "Scalar", None)
    if not isinstance(scalar, torch._ops.OpOverload):
        return None
    arguments = scalar._schema.arguments
    return scalar if len(arguments) > 1 and str(arguments[1].type) in ("Scalar", "number") else None


def unlifted_module(program: torch.export.ExportedProgram) -> torch.nn.Module:
    """`program.module()` of a copy whose number-in-Tensor-slot calls use `.Scalar` overloads."""
    program = copy.deepcopy(program)
    changed = False
    for node in program.graph_module.graph.nodes:
        if node.op == "call_function" and (scalar := _scalar_overload(node)) is not None:
            node.target = scalar
            changed = True
    if changed:
        program.graph_module.recompile()
    return program.module()
