"""Per debug handle: op names, op types, source stack traces, module paths (for the ETRecord)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from torch.export import ExportedProgram

from stages.handles.debug_handles import DEBUG_HANDLE_META, DebugHandle
from stages.handles.graph_handles import iter_operator_nodes


@dataclass(frozen=True)
class HandleInfo:
    """What one debug handle stands for in the model."""

    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    stack_traces: tuple[str, ...]
    module_hierarchy: tuple[str, ...]


def op_type(target: object) -> str:
    """'aten.linear.default' for an OpOverload (ExecuTorch's edge ops too), else the name."""
    if type(target).__name__ == "EdgeOpOverload":
        target = getattr(target, "_op", target)
    name = getattr(target, "__name__", None) if not hasattr(target, "_schema") else None
    return name or str(target)


def module_path(meta: dict[str, object]) -> str:
    """Deepest nn.Module path of a node ('blocks.0.attn.qkv'), '' at top level."""
    stack = meta.get("nn_module_stack") or {}
    if not isinstance(stack, dict) or not stack:
        return ""
    path = list(stack.values())[-1]
    raw = path[0] if isinstance(path, tuple | list) else str(path)
    return str(raw).replace("L['self'].", "").replace("L__self___", "")


def collect_handle_info(program: ExportedProgram) -> dict[DebugHandle, HandleInfo]:
    """Group operator nodes by handle; getitem nodes add nothing new."""
    grouped: dict[DebugHandle, list[tuple[str, str, str, str]]] = defaultdict(list)
    for node in iter_operator_nodes(program.graph_module):
        handle = node.meta.get(DEBUG_HANDLE_META)
        if handle is None or getattr(node.target, "__name__", "") == "getitem":
            continue
        grouped[int(handle)].append(
            (
                node.name,
                op_type(node.target),
                str(node.meta.get("stack_trace") or ""),
                module_path(node.meta),
            )
        )
    return {
        handle: HandleInfo(
            op_names=tuple(r[0] for r in rows),
            op_types=tuple(r[1] for r in rows),
            stack_traces=tuple(r[2] for r in rows),
            module_hierarchy=tuple(r[3] for r in rows),
        )
        for handle, rows in sorted(grouped.items())
    }
