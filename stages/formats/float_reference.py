"""The exported fp32 program as the reference of an int8 (PT2E) or fp16 ExecuTorch program.

ExecuTorch's ETRecord records the program it lowered: quantized (quantize/dequantize ops, int8
weights) or half. Comparing against it would hide what the precision costs, so when the fp32
program it was made from is at hand, that program is the reference: each of its ops takes the
debug handle of the same-named op of the lowered program, and a handle that only
quantize/dequantize ops carry (a weight's dequantize, an input's quantize) is attributed to the
op it serves, so no q/dq op is ever a row of its own. An op the lowered program folded into the op
before it (a BatchNorm into its convolution at int8) shares that op's handle, so the value the
folded kernel computes is compared with the folded op's output.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.op_encoding import OpEncodingError, op_name

QDQ_NAMESPACE = "quantized_decomposed."
# torchao's affine quantization ops (quantize_'s schemes: 8da4w): q/dq ops as PT2E's are.
AFFINE_NAMESPACE = "torchao."
DYNAMIC_QPARAMS_OP = "torchao.choose_qparams_affine"
AFFINE_DEQUANTIZE_OP = "torchao.dequantize_affine"
# Name prefix of the op an executorch_* fault adds after its target (stages.lower.executorch.fault).
FAULT_NODE_PREFIX = "injected_fault_"
FAULT_KINDS_ADDED = ("scale", "offset", "nan")


class FloatReferenceError(ValueError):
    """The fp32 program is not the one the lowered program was made from; names the op."""


def _op(target: object) -> str:
    """The op's name; targets that are no ATen op overload (getitem, alloc) by their str."""
    try:
        return op_name(target)
    except OpEncodingError:
        return str(target)


def is_qdq(node: torch.fx.Node) -> bool:
    """A quantize or dequantize op of PT2E."""
    return node.op == "call_function" and _op(node.target).startswith(
        (QDQ_NAMESPACE, AFFINE_NAMESPACE)
    )


def is_injected_fault(node: torch.fx.Node) -> bool:
    """The op a backend.fault on an executorch_* backend added (the reference lacks it)."""
    return node.op == "call_function" and node.name.startswith(FAULT_NODE_PREFIX)


def injected_faults(program: torch.export.ExportedProgram) -> list[dict[str, str]]:
    """The faults the lowered program carries: kind and target op, from the fault ops' names."""
    found = []
    for node in program.graph_module.graph.nodes:
        if is_injected_fault(node):
            rest = node.name.removeprefix(FAULT_NODE_PREFIX)
            kind = next((k for k in FAULT_KINDS_ADDED if rest.startswith(f"{k}_")), "")
            if kind:  # not a step gate's op (`injected_fault_gate_...`)
                found.append({"kind": kind, "node": rest.removeprefix(f"{kind}_")})
    return found


def _followed_op(node: torch.fx.Node) -> torch.fx.Node | None:
    """The node an op follows: its input, back over quantize/dequantize ops."""
    source = node.args[0] if node.args else None
    while isinstance(source, torch.fx.Node) and is_qdq(source) and source.args:
        source = source.args[0]
    return source if isinstance(source, torch.fx.Node) else None


def lowered_precision(program: torch.export.ExportedProgram) -> str:
    """int8 when the program has q/dq ops, fp16 when its float inputs are half (a program
    whose inputs are all integers, a text model's token ids: its float weights), else fp32."""
    nodes = list(program.graph_module.graph.nodes)
    if any(n.op == "call_function" and _op(n.target).startswith(DYNAMIC_QPARAMS_OP) for n in nodes):
        return "8da4w"
    if any(is_qdq(n) for n in nodes):
        return "int8"
    user_inputs = set(program.graph_signature.user_inputs)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    floats = _float_values(n for n in placeholders if n.name in user_inputs)
    floats = floats or _float_values(placeholders)
    return "fp16" if floats and all(v.dtype == torch.float16 for v in floats) else "fp32"


def _float_values(nodes: Iterable[torch.fx.Node]) -> list[torch.Tensor]:
    values = [n.meta.get("val") for n in nodes]
    return [v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()]


def _served_op(node: torch.fx.Node) -> torch.fx.Node | None:
    """The op a q/dq op serves: the op whose output it quantizes (up its input, over q/dq ops),
    else, for a weight's or an input's, the first op its value feeds."""
    source = _followed_op(node)
    if source is not None and source.op == "call_function":
        return source
    frontier, seen = list(node.users), set()
    while frontier:
        user = frontier.pop(0)
        if user in seen or user.op != "call_function":
            continue
        seen.add(user)
        if not is_qdq(user):
            return user
        frontier.extend(user.users)
    return None


def qdq_attribution(lowered: torch.export.ExportedProgram) -> dict[int, int]:
    """Handle carried only by q/dq ops → the handle of the op they serve; an injected fault's
    handle → the handle of the op it follows."""
    by_handle: dict[int, list[torch.fx.Node]] = {}
    for node in lowered.graph_module.graph.nodes:
        handle = node.meta.get(DEBUG_HANDLE_META)
        if node.op == "call_function" and isinstance(handle, int):
            by_handle.setdefault(handle, []).append(node)
    remap: dict[int, int] = {}
    for handle, nodes in by_handle.items():
        if all(is_injected_fault(n) for n in nodes):
            served = _followed_op(nodes[0])
        elif all(is_qdq(n) for n in nodes):
            served = next((s for n in nodes if (s := _served_op(n)) is not None), None)
        else:
            continue
        target = served.meta.get(DEBUG_HANDLE_META) if served is not None else None
        if isinstance(target, int):
            remap[handle] = target
    return remap


# A quantize op's affine parameters as the analysis takes them: scale, zero point, int range.
QParams = tuple[float, int, int, int]
_PER_TENSOR_QUANTIZE = "quantize_per_tensor"


def activation_qparams(
    lowered: torch.export.ExportedProgram, reference: torch.export.ExportedProgram | None = None
) -> dict[str, QParams]:
    """Node name → the per-tensor quantization its value gets in `lowered` (a PT2E program):
    the scale and zero point its calibration chose, which the expected error then uses instead
    of a range of its own. Values that are not plain finite numbers are skipped. With the
    `reference` (the fp32 program), names are those of the reference ops the lowered ones were
    made from (`take_handles`' match: ops a higher-order op held, a Hugging Face rotary block
    under `wrap_with_set_grad_enabled`, all have that op as their provenance root)."""
    ours = _Reference.of(reference) if reference is not None else None
    found: dict[str, QParams] = {}
    for node in lowered.graph_module.graph.nodes:
        kind = _op(node.target).removeprefix(QDQ_NAMESPACE)
        if not is_qdq(node) or not kind.startswith(_PER_TENSOR_QUANTIZE):
            continue
        source, args = (node.args[0] if node.args else None), node.args[1:5]
        if not isinstance(source, torch.fx.Node) or len(args) < 4:
            continue
        name = source.name if source.op == "placeholder" else _reference_name(ours, source)
        params = plain_qparams(*args)
        if params is not None and name not in found:
            found[name] = params
    return found


def _reference_name(ours: _Reference | None, node: torch.fx.Node) -> str:
    """The name of the reference op `node` was made from (its provenance root without one)."""
    if ours is not None and node.target is not operator.getitem:
        match = _reference_match(ours, node)
        if match is not None and _same_op(_op(match.target), _op(node.target)):
            return match.name
    return source_name(node)


def plain_qparams(scale: object, zero: object, low: object, high: object) -> QParams | None:
    """The four arguments as numbers, or None (a tensor-valued or hostile argument)."""
    if not isinstance(scale, float | int) or isinstance(scale, bool):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (zero, low, high)):
        return None
    zero_i, low_i, high_i = int(zero), int(low), int(high)  # type: ignore[call-overload]
    if not (math.isfinite(scale) and scale > 0 and low_i < high_i and low_i <= zero_i <= high_i):
        return None
    return float(scale), zero_i, low_i, high_i


def provenance_names(node: torch.fx.Node) -> list[str]:
    """The node's name, then the names along its `from_node` provenance, newest first, ending
    at its root (torch records it through `module()`, PT2E, re-export and ExecuTorch's passes)."""
    names, sources = [node.name], node.meta.get("from_node")
    for _ in range(64):  # a provenance chain is a few passes long; a hostile one is cut short
        if not isinstance(sources, list | tuple) or not sources:
            break
        source = sources[-1]
        found = getattr(source, "name", None)
        if isinstance(found, str) and found:
            names.append(found)
        sources = getattr(source, "from_node", None)
    return names


def source_name(node: torch.fx.Node) -> str:
    """The name the node had in the program it was made from: the root of its `from_node`
    provenance (a re-export numbers names afresh, so `arange_1` there may be the fp32 program's
    `arange_2`), else its own."""
    return provenance_names(node)[-1]


def _same_op(reference: str, lowered: str) -> bool:
    """The same op, or its `.Scalar` overload for the `.Tensor` one: the lower stage calls it so
    where a number sits in a Tensor slot (stages.lower.unlifted_module)."""
    if reference == lowered:
        return True
    ours, theirs = reference.rsplit(".", 1), lowered.rsplit(".", 1)
    return ours[0] == theirs[0] and {ours[-1], theirs[-1]} == {"Tensor", "Scalar"}


@dataclass
class _Reference:
    """The reference's ops by name and by provenance root, and what each lowered op matched."""

    by_name: dict[str, torch.fx.Node]
    by_root: dict[str, list[torch.fx.Node]] = field(default_factory=dict)
    matched: dict[torch.fx.Node, torch.fx.Node] = field(default_factory=dict)

    @classmethod
    def of(cls, program: torch.export.ExportedProgram) -> _Reference:
        ops = [n for n in program.graph_module.graph.nodes if n.op == "call_function"]
        found = cls({n.name: n for n in ops})
        for node in ops:
            found.by_root.setdefault(source_name(node), []).append(node)
        return found


def _reference_match(ours: _Reference, node: torch.fx.Node) -> torch.fx.Node | None:
    """The reference op `node` was made from. Both programs come from one traced graph, so the
    op of the same kind with the same provenance root (one named along `node`'s provenance
    when the root has several: a decomposition's pieces); else by name."""
    kind = _op(node.target)
    chain = provenance_names(node)
    same = [r for r in ours.by_root.get(chain[-1], ()) if _same_op(_op(r.target), kind)]
    named = [r for r in same if r.name in chain]
    for found in (same, named):
        if len(found) == 1:
            return found[0]
    source = ours.by_name.get(chain[-1])
    if source is not None and _same_op(_op(source.target), kind):
        return source
    return ours.by_name.get(node.name)


def _picked_output(ours: _Reference, node: torch.fx.Node) -> tuple[bool, torch.fx.Node | None]:
    """For a `getitem` (an output of a multi-output op: a BatchNorm, a chunk's split): whether
    it is one, and the reference's `getitem` of the same output of the op its source matched.
    Names and provenance cannot tell getitems apart (each carries its source op's), and one
    without a counterpart (an output the reference never reads) shares its op's handle anyway."""
    if node.target is not operator.getitem or len(node.args) < 2:
        return False, None
    source = ours.matched.get(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
    if source is None:
        return True, None
    same = (
        u for u in source.users if u.target is operator.getitem and u.args[1:2] == node.args[1:2]
    )
    return True, next(same, None)


def _share_with_outputs(ours: _Reference) -> None:
    """Each reference `getitem` of a handled multi-output op carries that op's handle, as the
    export stage numbered them."""
    for node in ours.by_name.values():
        handle = node.meta.get(DEBUG_HANDLE_META)
        if node.target is operator.getitem and handle is None and node.args:
            source = node.args[0]
            if isinstance(source, torch.fx.Node) and source.meta.get(DEBUG_HANDLE_META) is not None:
                node.meta[DEBUG_HANDLE_META] = source.meta[DEBUG_HANDLE_META]


def take_handles(
    reference: torch.export.ExportedProgram, lowered: torch.export.ExportedProgram, where: str
) -> torch.export.ExportedProgram:
    """`reference` with the lowered program's handles on the ops they were made from (others
    cleared)."""
    ours = _Reference.of(reference)
    for node in ours.by_name.values():
        node.meta.pop(DEBUG_HANDLE_META, None)
    for node in lowered.graph_module.graph.nodes:
        handle = node.meta.get(DEBUG_HANDLE_META)
        if node.op != "call_function" or is_qdq(node) or is_injected_fault(node):
            continue
        if not isinstance(handle, int):
            continue
        picked, match = _picked_output(ours, node)
        if picked and match is None:
            continue
        match = match or _reference_match(ours, node)
        if match is None or not _same_op(_op(match.target), _op(node.target)):
            found = "no such op" if match is None else _op(match.target)
            raise FloatReferenceError(
                f"{where} is not the fp32 program the ETRecord's program was made from: its op "
                f"{node.name} ({_op(node.target)}) has {found} there; pass the exported "
                "program it was lowered from as analyze.exported_program"
            )
        ours.matched[node] = match
        match.meta[DEBUG_HANDLE_META] = handle
    _fold_into_producers(ours)
    _share_with_outputs(ours)
    _mark_weight_groups(ours.matched)
    return reference


# Node meta of the reference: on a linear whose lowered weight torchao quantized in groups
# (8da4w), the group size along its input features; such a linear's input is quantized per
# token at run time. A linear without it was left in float.
WEIGHT_GROUP_META = "delegate_debugger_weight_group"


def _mark_weight_groups(matched: dict[torch.fx.Node, torch.fx.Node]) -> None:
    """Give each reference linear whose lowered weight is a grouped `dequantize_affine` its
    group size (the last entry of the op's block size)."""
    for lowered, reference in matched.items():
        weight = lowered.args[1] if len(lowered.args) > 1 else None
        if not isinstance(weight, torch.fx.Node) or weight.op != "call_function":
            continue
        if not _op(weight.target).startswith(AFFINE_DEQUANTIZE_OP) or len(weight.args) < 2:
            continue
        block = weight.args[1]
        if isinstance(block, list | tuple) and block and isinstance(block[-1], int):
            reference.meta[WEIGHT_GROUP_META] = int(block[-1])


def left_in_float(reference: torch.export.ExportedProgram) -> tuple[int, list[dict[str, Any]]]:
    """In a reference whose linears `take_handles` marked with their weight group: the group
    size, and each linear left in float (op, in_features, why): (0, []) when none is grouped."""
    linears = [
        n
        for n in reference.graph_module.graph.nodes
        if n.op == "call_function" and _op(n.target) == "aten.linear.default"
    ]
    sizes = [int(n.meta[WEIGHT_GROUP_META]) for n in linears if n.meta.get(WEIGHT_GROUP_META)]
    if not sizes:
        return 0, []
    group = max(set(sizes), key=sizes.count)
    left = []
    for node in linears:
        if node.meta.get(WEIGHT_GROUP_META):
            continue
        weight = node.args[1].meta.get("val") if isinstance(node.args[1], torch.fx.Node) else None
        in_features = int(weight.shape[-1]) if isinstance(weight, torch.Tensor) else -1
        reason = (
            f"in_features {in_features} not divisible by group {group}"
            if in_features > 0 and in_features % group
            else "not quantized by the lowered program"
        )
        left.append({"op": node.name, "in_features": in_features, "reason": reason})
    return group, left


# Ops PT2E and ExecuTorch fold into the op before them (a BatchNorm into its convolution's
# weights): the lowered program has no node of theirs, and its producer's value is theirs.
FOLDED_OPS = ("batch_norm",)
# Node meta of the reference: on a folded op, the name of the op it was folded into (whose
# quantization its value gets); on that op, True: its own value is never materialized.
FOLDED_INTO_META = "delegate_debugger_folded_into"
FOLDS_NEXT_META = "delegate_debugger_folds_next"


def _fold_into_producers(ours: _Reference) -> None:
    """A reference op the lowered program folded away takes the handle of the op it was folded
    into (its first input's producer, whose only user it is), so that handle's group ends at
    its output: a tap of the folded conv holds the BatchNorm's value and is compared with it.
    Folded means the lowered op matched to its consumer reads the producer's lowered op
    directly (through quantize/dequantize only); anything between them (a fault's op, a
    decomposed BatchNorm) leaves the handles as they are."""
    lowered_of = {ref: low for low, ref in ours.matched.items()}
    for node in ours.by_name.values():
        if node.meta.get(DEBUG_HANDLE_META) is not None or not node.args:
            continue
        if not any(kind in _op(node.target) for kind in FOLDED_OPS):
            continue
        producer = node.args[0]
        if not isinstance(producer, torch.fx.Node) or len(producer.users) != 1:
            continue
        handle = producer.meta.get(DEBUG_HANDLE_META)
        folded_into = lowered_of.get(producer)
        if handle is None or folded_into is None:
            continue
        consumers = [lowered_of.get(user) for user in _value_users(node)]
        if any(c is not None and folded_into in _read_through_qdq(c) for c in consumers):
            node.meta[DEBUG_HANDLE_META] = handle
            node.meta[FOLDED_INTO_META] = producer.name  # as activation_qparams names it
            producer.meta[FOLDS_NEXT_META] = True


def _value_users(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The ops that read `node`'s value (through the `getitem` of a multi-output op)."""
    found: list[torch.fx.Node] = []
    for user in node.users:
        if user.target is operator.getitem:
            found.extend(user.users)
        else:
            found.append(user)
    return found


def _read_through_qdq(node: torch.fx.Node) -> set[torch.fx.Node]:
    """The ops whose values `node` reads, looking through quantize/dequantize ops."""
    found: set[torch.fx.Node] = set()
    pending = [a for a in node.all_input_nodes]
    for _ in range(64):  # a q/dq chain is two or three ops long
        if not pending:
            break
        current = pending.pop()
        if is_qdq(current):
            pending.extend(current.all_input_nodes)
        else:
            found.add(current)
    return found


def remapped(handles: Iterable[int], remap: dict[int, int]) -> list[int]:
    """Handles with q/dq-only ones replaced by the op they serve (order and repeats kept, as
    ExecuTorch's Inspector lists them)."""
    return [remap.get(int(handle), int(handle)) for handle in handles]
