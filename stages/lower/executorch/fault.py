"""`backend.fault.*` on `executorch_*` backends: one extra op after the target, in the program
handed to ExecuTorch, so its real kernels compute a wrong value the reference does not have.

The op (`aten.mul` for scale, `aten.add` for offset, `aten.mul` by NaN for nan) follows the
target op in the fp32 program, before int8 quantization or the fp16 conversion (so the quantizer
quantizes it like any op), and takes the target's users; its name,
`injected_fault_<kind>_<target>`, tells the analysis (stages.formats.float_reference) to file
its debug handle under the target op. At int8 a nan fault's op multiplies by 1 while PT2E
calibrates (its observers refuse NaN: `torch.histc: range of [nan, nan] is not finite`) and by
NaN from `convert_pt2e` on (`arm_nan_faults`): the quantization is the unfaulted program's.
"""

from __future__ import annotations

import operator
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
# A nan fault's op that multiplies by 1 until `arm_nan_faults` (custom meta, kept by PT2E).
NAN_AFTER_CONVERT_META = "delegate_debugger_nan_after_convert"
# Name prefix of the ops that compute a step gate (backend.fault.from_step): injected ops too, so
# the analysis files them under the target (stages.formats.float_reference), no fault of their own.
GATE_NODE_PREFIX = f"{FAULT_NODE_PREFIX}gate_"


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
    program: torch.export.ExportedProgram,
    target: str,
    kind: str,
    value: float,
    from_position: int | None = None,
    nan_after_convert: bool = False,
) -> torch.export.ExportedProgram:
    """`program` (changed in place) with the fault op after `target`; its output is the
    program's output where the target's was. With `from_position` (a generation program), the
    fault acts only on steps whose last position is at least that (see `step_gate`). With
    `nan_after_convert` (int8), a nan fault multiplies by 1 until `arm_nan_faults`."""
    graph = program.graph_module.graph
    node = next((n for n in graph.nodes if n.op == "call_function" and n.name == target), None)
    if node is None:
        raise ExecuTorchFaultError(
            f"backend.fault targets {target}, which the program at this precision lacks"
        )
    anchor = node
    pending_nan = kind == "nan" and nan_after_convert and from_position is None
    operand: Any = float("nan") if kind == "nan" and not pending_nan else float(value)
    if pending_nan:
        operand = 1.0
    if from_position is not None:
        operand = _gated_operand(program, anchor, kind, float(value), from_position)
    with graph.inserting_after(
        anchor
    ):  # a gate's ops precede the target (they need only input_pos)
        fault = graph.call_function(_FAULT_OPS[kind], (anchor, operand))
    anchor.replace_all_uses_with(fault, delete_user_cb=lambda user: user is not fault)
    fault.name = f"{FAULT_NODE_PREFIX}{kind}_{target}"
    _rename_output(program, anchor.name, fault.name)
    fault.meta = {k: v for k, v in anchor.meta.items() if k in ("val", "stack_trace")}
    fault.meta["nn_module_stack"] = dict(node.meta.get("nn_module_stack", {}))
    fault.meta["custom"] = {FAULT_META: fault.name}  # torch.export keeps it, not the name
    if pending_nan:
        fault.meta["custom"][NAN_AFTER_CONVERT_META] = True
    for other in graph.nodes:  # a re-export numbers the ops after the fault one further on
        if other.op == "call_function" and other is not fault:
            other.meta["custom"] = {**(other.meta.get("custom") or {}), NAME_META: other.name}
    graph.lint()
    program.graph_module.recompile()
    return program


def arm_nan_faults(module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`module` (PT2E's converted model, changed in place) with each pending nan fault's op
    multiplying by NaN: its quantized constant 1 (and that constant's dequantize) replaced by a
    float NaN, so the program XNNPACK lowers computes the NaN after the observers are gone."""
    graph = module.graph
    armed = [
        node for node in graph.nodes if (node.meta.get("custom") or {}).get(NAN_AFTER_CONVERT_META)
    ]
    for node in armed:
        node.args = (node.args[0], float("nan"), *node.args[2:])
    if armed:
        graph.eliminate_dead_code()
        module.recompile()
    return module


def _gated_operand(
    program: torch.export.ExportedProgram,
    anchor: torch.fx.Node,
    kind: str,
    value: float,
    from_position: int,
) -> torch.fx.Node:
    """The fault op's second operand as a 0-d tensor that is the plain operand's value when the
    gate is on and leaves the target's value alone when off: offset's delta (value or 0),
    scale's factor (value or 1), nan's factor (NaN or 1: 0/0 or 1/1)."""
    graph = program.graph_module.graph
    gate = step_gate(program, anchor, from_position)
    aten, meta = torch.ops.aten, {k: v for k, v in anchor.meta.items() if k == "stack_trace"}
    steps: list[tuple[Any, tuple[Any, ...]]]
    if kind == "offset":
        steps = [(aten.mul.Tensor, (gate, value))]
    elif kind == "scale":
        steps = [(aten.mul.Tensor, (gate, value - 1.0)), (aten.add.Tensor, (None, 1.0))]
    else:
        steps = [(aten.mul.Tensor, (gate, -1.0)), (aten.add.Tensor, (None, 1.0))]
        steps.append((aten.div.Tensor, (None, None)))
    last = gate
    for op, args in steps:
        with graph.inserting_after(last):
            filled = tuple(last if a is None else a for a in args)
            last = _gate_node(graph, anchor.name, op, filled, meta)
        last.meta["val"] = op(*_vals(filled))
    return last


def name_fault_ops(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """The fault op, and the ops after it, named again after a re-export (int8, fp16) named
    them by their op (the fault's `mul` took the name of the next `mul`, which moved on): the
    analysis matches the lowered program's ops to the fp32 program's by name. `getitem` nodes
    keep their names: a re-export gives them their multi-output op's meta (a BatchNorm's three
    getitems all wanted its name, and ExecuTorch could not serialize the program)."""
    renames, wanted_once = [], set()
    for node in program.graph_module.graph.nodes:
        if node.target is operator.getitem:
            continue  # a re-export copies its source op's meta, that op's name included
        custom = node.meta.get("custom") or {}
        wanted = custom.get(FAULT_META, custom.get(NAME_META))
        if isinstance(wanted, str) and node.name != wanted and wanted not in wanted_once:
            wanted_once.add(wanted)
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


def _gate_node(
    graph: torch.fx.Graph, name: str, target: Any, args: tuple[Any, ...], meta: dict[str, Any]
) -> torch.fx.Node:
    node = graph.call_function(target, args)
    node.name = f"{GATE_NODE_PREFIX}{len(graph.nodes)}_{name}"
    node.meta = dict(meta)
    return node


def step_gate(
    program: torch.export.ExportedProgram, anchor: torch.fx.Node, from_position: int
) -> torch.fx.Node:
    """A 0-d float: 1.0 when the step's last position (`input_pos[-1]`, the generation
    program's second input) is at least `from_position`, else 0.0; inserted before `anchor`."""
    graph = program.graph_module.graph
    names = [*program.graph_signature.user_inputs, "", ""]
    position = next((n for n in graph.nodes if n.op == "placeholder" and n.name == names[1]), None)
    if position is None:
        raise ExecuTorchFaultError(
            "backend.fault.from_step needs a generation program (tokens, input_pos, *caches)"
        )
    meta = {k: v for k, v in anchor.meta.items() if k == "stack_trace"}
    with graph.inserting_before(anchor):
        last = _gate_node(graph, anchor.name, torch.ops.aten.select.int, (position, 0, -1), meta)
        on = _gate_node(graph, anchor.name, torch.ops.aten.ge.Scalar, (last, from_position), meta)
    with graph.inserting_after(on):
        gate = _gate_node(graph, anchor.name, torch.ops.aten._to_copy.default, (on,), meta)
        gate.kwargs = {"dtype": torch.float32}
    for node in (last, on, gate):  # fake values, as export would have traced them
        op: Any = node.target
        node.meta["val"] = op(*_vals(node.args), **node.kwargs)
    return gate


def _vals(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args)
