"""`backend.fault.*` on `executorch_*` backends: one extra op after the target, in the program
handed to ExecuTorch, so its real kernels compute a wrong value the reference does not have.

The op (`aten.mul` for scale, `aten.add` for offset, `aten.mul` by NaN for nan) follows the
target op in the fp32 program, before int8 quantization or the fp16 conversion (so the quantizer
quantizes it like any op), and takes the target's users; its name,
`injected_fault_<kind>_<target>`, tells the analysis (stages.formats.float_reference) to file
its debug handle under the target op.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch.export.graph_signature import TensorArgument

from stages.formats.float_reference import FAULT_NODE_PREFIX
from stages.handles.debug_handles import DEBUG_HANDLE_META

# backend.fault.kind values an extra op can express, and the op with its scalar operand.
_FAULT_OPS: dict[str, Any] = {
    "scale": torch.ops.aten.mul.Tensor,
    "offset": torch.ops.aten.add.Tensor,
    "nan": torch.ops.aten.mul.Tensor,
}


FAULT_META = "delegate_debugger_fault"
# Every other op's name before the re-export (custom meta, as the fault op's).
NAME_META = "delegate_debugger_name"


class ExecuTorchFaultError(ValueError):
    """A fault an executorch_* backend cannot apply; names the option and what to do."""


def fault_target_name(program: torch.export.ExportedProgram, fault: Any) -> str:
    """The name of the op `backend.fault.node` / `backend.fault.debug_handle` names in the
    exported program (debug handles are the export stage's)."""
    if fault.kind not in _FAULT_OPS:
        raise ExecuTorchFaultError(
            f"backend.fault.kind={fault.kind}: ExecuTorch backends take {sorted(_FAULT_OPS)} "
            "(an extra op after the target); use an emulated backend for the others"
        )
    nodes = [n for n in program.graph_module.graph.nodes if n.op == "call_function"]
    if fault.node:
        if "." in str(fault.node):
            raise ExecuTorchFaultError(
                f"backend.fault.node={fault.node}: ExecuTorch backends fault top-level ops only"
            )
        found = [n for n in nodes if n.name == fault.node]
    else:
        found = [n for n in nodes if n.meta.get(DEBUG_HANDLE_META) == int(fault.debug_handle)]
    if not found:
        shown = ", ".join(n.name for n in nodes[:12])
        raise ExecuTorchFaultError(
            f"backend.fault.node={fault.node} / backend.fault.debug_handle={fault.debug_handle} "
            f"names no op of the exported program (e.g. {shown}, ...)"
        )
    return str(found[0].name)


def _rename_output(program: torch.export.ExportedProgram, old: str, new: str) -> None:
    """The graph signature names the fault op where it named the target (a faulted output)."""
    specs = program.graph_signature.output_specs
    for index, spec in enumerate(specs):
        if isinstance(spec.arg, TensorArgument) and spec.arg.name == old:
            specs[index] = replace(spec, arg=TensorArgument(name=new))


def insert_fault(
    program: torch.export.ExportedProgram, target: str, kind: str, value: float
) -> torch.export.ExportedProgram:
    """`program` (changed in place) with the fault op after `target`; its output is the
    program's output where the target's was."""
    graph = program.graph_module.graph
    node = next((n for n in graph.nodes if n.op == "call_function" and n.name == target), None)
    if node is None:
        raise ExecuTorchFaultError(
            f"backend.fault targets {target}, which the program at this precision lacks"
        )
    anchor = node
    operand = float("nan") if kind == "nan" else float(value)
    with graph.inserting_after(anchor):
        fault = graph.call_function(_FAULT_OPS[kind], (anchor, operand))
    anchor.replace_all_uses_with(fault, delete_user_cb=lambda user: user is not fault)
    fault.name = f"{FAULT_NODE_PREFIX}{kind}_{target}"
    _rename_output(program, anchor.name, fault.name)
    fault.meta = {k: v for k, v in anchor.meta.items() if k in ("val", "stack_trace")}
    fault.meta["nn_module_stack"] = dict(node.meta.get("nn_module_stack", {}))
    fault.meta["custom"] = {FAULT_META: fault.name}  # torch.export keeps it, not the name
    for other in graph.nodes:  # a re-export numbers the ops after the fault one further on
        if other.op == "call_function" and other is not fault:
            other.meta["custom"] = {**(other.meta.get("custom") or {}), NAME_META: other.name}
    graph.lint()
    program.graph_module.recompile()
    return program


def name_fault_ops(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """The fault op, and the ops after it, named again after a re-export (int8, fp16) named
    them by their op (the fault's `mul` took the name of the next `mul`, which moved on): the
    analysis matches the lowered program's ops to the fp32 program's by name."""
    renames = []
    for node in program.graph_module.graph.nodes:
        custom = node.meta.get("custom") or {}
        wanted = custom.get(FAULT_META, custom.get(NAME_META))
        if isinstance(wanted, str) and node.name != wanted:
            renames.append((node, node.name, wanted))
    moving = {node for node, _, _ in renames}
    kept = {n.name for n in program.graph_module.graph.nodes if n not in moving}
    renames = [r for r in renames if r[2] not in kept]  # never two nodes of one name
    for index, (node, old, _) in enumerate(renames):  # two steps: no name is held twice
        node.name = f"{old}__renaming_{index}"
        _rename_output(program, old, node.name)
    for node, _, wanted in renames:
        old, node.name = node.name, wanted
        _rename_output(program, old, wanted)
    program.graph_module.recompile()
    return program
