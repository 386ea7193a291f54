"""Which values of a program handed to ExecuTorch are tapped (`runtime.observe=tap`), and which
ops each one stands for.

A tap must observe a value the delegate really computes, or it changes what runs or reads the
wrong value: ExecuTorch's default selection (every call_function) taps q/dq nodes and values
inside fused kernels, which at int8 pulls convolutions out of XNNPACK and makes the runtime
return other tensors than the ones filed (issue 34). So only delegated ops are tapped, an op
whose only user is a fusable activation is covered by the activation's tap (XNNPACK fuses it as
the kernel's output range), and at int8 an op followed by its quantize node is tapped at that
node: the int8 tensor the kernel wrote, dequantized at run time with the node's scale.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from stages.formats.float_reference import FAULT_NODE_PREFIX, is_qdq
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.lower.executorch.fault import GATE_NODE_PREFIX
from stages.op_encoding import OpEncodingError, op_name

# Activations XNNPACK fuses into the kernel before them as an output range.
FUSED_ACTIVATIONS = frozenset(
    {"aten.relu.default", "aten.hardtanh.default", "aten.clamp.default", "aten.relu6.default"}
)
QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"


@dataclass(frozen=True)
class TapPoint:
    """One tapped value: the node observed, the ops (and their handles) it is filed under, the
    delegate call that computes it, what it must look like, and how to dequantize it."""

    source: str
    ops: tuple[str, ...]
    handles: tuple[int, ...]
    instruction_id: int
    dtype: str
    shape: tuple[int, ...]
    scale: float | None = None
    zero_point: int | None = None
    # Every instruction that logs a value under these handles (a decomposed op runs partly
    # outside the delegate): the tapped value is the op's final one and is placed after them.
    logged_by: tuple[int, ...] = ()

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _op(node: torch.fx.Node) -> str:
    try:
        return op_name(node.target)
    except OpEncodingError:
        return str(node.target)


def handles_by_name(etrecord: Any) -> dict[str, int]:
    """Op name → debug handle of the program ExecuTorch lowered, its edge program's handles
    carried back to it (as ExecuTorch's Inspector does)."""
    from executorch.devtools.inspector._inspector_utils import propagate_back_debug_handle

    aten = copy.deepcopy(etrecord.exported_program)
    propagate_back_debug_handle(aten, etrecord.export_graph_id, etrecord.edge_dialect_program)
    found: dict[str, int] = {}
    for node in aten.graph_module.graph.nodes:
        handle = node.meta.get(DEBUG_HANDLE_META)
        if isinstance(handle, tuple | list):
            handle = handle[0] if handle else None
        if node.op == "call_function" and handle:
            found[node.name] = int(handle)
    return found


def delegate_instructions(etrecord: Any, method: str = "forward") -> dict[int, int]:
    """Delegated handle → the instruction id of the delegate call that runs it."""
    handle_map = (etrecord._debug_handle_map or {}).get(method, {})
    found: dict[int, int] = {}
    for instruction in (etrecord._delegate_map or {}).get(method, {}):
        covered = handle_map.get(instruction, handle_map.get(str(instruction), []))
        for handle in covered if isinstance(covered, list) else [covered]:
            found.setdefault(int(handle), int(instruction))
    return found


def delegate_calls(etrecord: Any, method: str = "forward") -> list[int]:
    """Instruction ids of the program's delegate calls, in program order (one per payload, a
    call that runs no op of the program's own included)."""
    return sorted(int(i) for i in (etrecord._delegate_map or {}).get(method, {}))


def instructions_by_handle(etrecord: Any, method: str = "forward") -> dict[int, set[int]]:
    """Debug handle → every instruction (delegate call or kernel) that logs a value under it."""
    found: dict[int, set[int]] = {}
    for instruction, covered in ((etrecord._debug_handle_map or {}).get(method, {})).items():
        for handle in covered if isinstance(covered, list) else [covered]:
            found.setdefault(int(handle), set()).add(int(instruction))
    return found


def _sole_user(node: torch.fx.Node) -> torch.fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _covered_ops(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The node, preceded by the op it is fused into when it is a fused activation."""
    if _op(node) in FUSED_ACTIVATIONS and node.args and isinstance(node.args[0], torch.fx.Node):
        before = node.args[0]
        if before.op == "call_function" and not is_qdq(before) and _sole_user(before) is node:
            return [before, node]
    return [node]


def _point(
    node: torch.fx.Node, names: dict[str, int], instructions: dict[int, int]
) -> TapPoint | None:
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or node.name not in names:
        return None
    if not all(isinstance(s, int) for s in value.shape):
        return None  # a symbolic size: its shape cannot be checked
    instruction = instructions.get(names[node.name])
    user = _sole_user(node)
    if instruction is None or (user is not None and _op(user) in FUSED_ACTIVATIONS):
        return None  # not delegated, or observed at the activation fused after it
    ops = [n for n in _covered_ops(node) if n.name in names]
    handles = tuple(names[n.name] for n in ops)
    if user is not None and _op(user) == QUANTIZE and len(user.args) >= 3:
        quantized = user.meta.get("val")
        return TapPoint(
            user.name,
            tuple(n.name for n in ops),
            handles,
            instruction,
            str(quantized.dtype if isinstance(quantized, torch.Tensor) else torch.int8),
            tuple(int(s) for s in value.shape),
            float(str(user.args[1])),
            int(str(user.args[2])),
        )
    return TapPoint(
        node.name,
        tuple(n.name for n in ops),
        handles,
        instruction,
        str(value.dtype),
        tuple(int(s) for s in value.shape),
    )


def _ops(etrecord: Any) -> list[torch.fx.Node]:
    """The program's ops: call_function nodes that are no q/dq op and no getitem."""
    return [
        n
        for n in etrecord.exported_program.graph_module.graph.nodes
        if n.op == "call_function" and not is_qdq(n) and n.target is not operator.getitem
    ]


def op_names(etrecord: Any) -> set[str]:
    """Names of the program's ops (q/dq and getitem nodes aside)."""
    return {n.name for n in _ops(etrecord)}


def sole_inputs(etrecord: Any) -> dict[str, str]:
    """Op → the op it reads (through a quantize/dequantize pair at int8), where each value on
    the way has only that one user: a value passed straight on."""
    found = {}
    for node in _ops(etrecord):
        current, before = node, node.args[0] if node.args else None
        while (
            isinstance(before, torch.fx.Node) and is_qdq(before) and _sole_user(before) is current
        ):
            current, before = before, before.args[0] if before.args else None
        if isinstance(before, torch.fx.Node) and _sole_user(before) is current:
            found[node.name] = before.name
    return found


def fused_activations(etrecord: Any) -> dict[str, str]:
    """Activation → the op XNNPACK fuses it into (its only producer, used by it alone)."""
    found = {}
    for node in _ops(etrecord):
        covered = _covered_ops(node)
        if len(covered) == 2:
            found[node.name] = covered[0].name
    return found


def _producer(node: torch.fx.Node) -> torch.fx.Node | None:
    """The op whose value `node` takes (through quantize/dequantize ops at int8)."""
    before = node.args[0] if node.args else None
    while isinstance(before, torch.fx.Node) and is_qdq(before):
        before = before.args[0] if before.args else None
    return before if isinstance(before, torch.fx.Node) else None


def _faults_onto_targets(points: list[TapPoint], etrecord: Any) -> list[TapPoint]:
    """A fault op (backend.fault.* on the real runtime) stands for its target's kernel computing
    a wrong value: its tap is the target's value, filed under the target (with both handles),
    and the target's own tap (the value before the fault) is dropped."""
    nodes = {n.name: n for n in etrecord.exported_program.graph_module.graph.nodes}
    by_op = {op: i for i, p in enumerate(points) for op in p.ops}
    out: list[TapPoint | None] = list(points)
    for index, point in enumerate(points):
        node = nodes.get(point.ops[0])
        if node is None or not node.name.startswith(FAULT_NODE_PREFIX):
            continue
        if node.name.startswith(GATE_NODE_PREFIX):
            continue
        target = _producer(node)
        found = by_op.get(target.name) if target is not None else None
        if found is None or out[found] is None:
            continue
        before = points[found]
        ops = before.ops + point.ops[1:]  # an activation fused after the fault stays filed
        out[index] = replace(point, ops=ops, handles=before.handles + point.handles)
        out[found] = None
    return [p for p in out if p is not None]


def tap_points(etrecord: Any, method: str = "forward") -> list[TapPoint]:
    """The values to tap in the program the ETRecord recorded, in graph order."""
    names = handles_by_name(etrecord)
    instructions = delegate_instructions(etrecord, method)
    logging = instructions_by_handle(etrecord, method)
    points = []
    for node in _ops(etrecord):
        point = _point(node, names, instructions)
        if point is not None:
            logged = set().union(*(logging.get(h, set()) for h in point.handles))
            points.append(replace(point, logged_by=tuple(sorted(logged))))
    return _faults_onto_targets(points, etrecord)
