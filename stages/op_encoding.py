"""JSON encoding of ATen calls shared by the lowered program and delegate blobs.

Arguments become JSON: value references `{"v": id}`, lists, scalars, dtypes, devices, layouts.
Ops are resolved only from `torch.ops.aten`, so loading a file can never call arbitrary code.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Container, Mapping
from typing import Any

import torch

ValueId = int


class OpEncodingError(ValueError):
    """An op or argument that this format cannot represent or resolve."""


def op_name(target: Any) -> str:
    """'aten.linear.default' for an OpOverload."""
    schema_name = getattr(target, "_schema", None)
    if schema_name is None:
        raise OpEncodingError(f"{target!r} is not an ATen op overload")
    return str(target)


def resolve_op(name: str) -> Callable[..., Any]:
    """'aten.linear.default' → torch.ops.aten.linear.default; other namespaces are refused."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise OpEncodingError(f"op {name!r} is not an 'aten.<op>.<overload>' name")
    try:
        packet = getattr(torch.ops.aten, parts[1])
        return getattr(packet, parts[2])
    except AttributeError as exc:
        raise OpEncodingError(f"unknown ATen op {name!r}") from exc


def encode_arg(arg: Any, value_id: Callable[[torch.fx.Node], ValueId]) -> Any:
    """fx argument → JSON-able structure."""
    if isinstance(arg, torch.fx.Node):
        return {"v": value_id(arg)}
    if isinstance(arg, list | tuple):
        return [encode_arg(a, value_id) for a in arg]
    if isinstance(arg, bool | int | str) or arg is None:
        return arg
    if isinstance(arg, float):
        if arg != arg or arg in (float("inf"), float("-inf")):
            return {"f": repr(arg)}
        return arg
    if isinstance(arg, torch.dtype):
        return {"dtype": str(arg).removeprefix("torch.")}
    if isinstance(arg, torch.device):
        return {"device": str(arg)}
    if isinstance(arg, torch.layout):
        return {"layout": str(arg).removeprefix("torch.")}
    if isinstance(arg, torch.memory_format):
        return {"memory_format": str(arg).removeprefix("torch.")}
    raise OpEncodingError(f"cannot encode argument {arg!r} of type {type(arg).__name__}")


def _torch_attr(name: str, kind: type) -> Any:
    value = getattr(torch, name, None)
    if not isinstance(value, kind):
        raise OpEncodingError(f"unknown torch {kind.__name__} {name!r}")
    return value


def decode_arg(data: Any) -> Any:
    """JSON → argument template; value references stay as `ValueRef`."""
    if isinstance(data, list):
        return [decode_arg(d) for d in data]
    if isinstance(data, Mapping):
        if "v" in data:
            return ValueRef(int(data["v"]))
        if "f" in data:
            return float(data["f"])
        if "dtype" in data:
            return _torch_attr(str(data["dtype"]), torch.dtype)
        if "device" in data:
            return torch.device(str(data["device"]))
        if "layout" in data:
            return _torch_attr(str(data["layout"]), torch.layout)
        if "memory_format" in data:
            return _torch_attr(str(data["memory_format"]), torch.memory_format)
        raise OpEncodingError(f"unknown argument encoding {dict(data)!r}")
    return data


class ValueRef:
    """A reference to a runtime value by id inside an argument template."""

    __slots__ = ("id",)

    def __init__(self, value_id: ValueId) -> None:
        self.id = value_id

    def __repr__(self) -> str:
        return f"%{self.id}"


def has_refs(template: Any) -> bool:
    if isinstance(template, ValueRef):
        return True
    if isinstance(template, list):
        return any(has_refs(t) for t in template)
    return False


def bind(template: Any) -> Callable[[list[Any]], Any]:
    """Compile an argument template into a fast `values -> argument` function."""
    if isinstance(template, ValueRef):
        index = template.id
        return lambda values: values[index]
    if isinstance(template, list) and has_refs(template):
        parts = [bind(t) for t in template]
        return lambda values: [p(values) for p in parts]
    return lambda values: template


def bind_args(templates: list[Any]) -> Callable[[list[Any]], list[Any]]:
    """Compile a positional-argument list; constant arguments cost nothing at run time."""
    binders = [bind(t) for t in templates]
    if all(not has_refs(t) for t in templates):
        constant = list(templates)
        return lambda values: constant
    return lambda values: [b(values) for b in binders]


def getitem_index(node: torch.fx.Node) -> int:
    """The index a `getitem` node takes from its source's tuple."""
    index = node.args[1]
    if not isinstance(index, int):
        raise OpEncodingError(f"{node.name}: getitem index {index!r} is not an int")
    return index


def output_slots(
    node: torch.fx.Node,
    value_id: Callable[[torch.fx.Node], ValueId],
    members: Container[torch.fx.Node] | None = None,
) -> tuple[list[ValueId], bool]:
    """Where a node's results go: for a multi-output op, its getitems' value ids by index (-1:
    unused) and True; else its own id and False. With `members` (inside a partition) only
    getitems among them count and the node's `val` does not size the list."""
    getitems = [
        u for u in node.users if u.target is operator.getitem and (members is None or u in members)
    ]
    val = node.meta.get("val") if members is None else None
    if not getitems and not isinstance(val, list | tuple):
        return [value_id(node)], False
    count = len(val) if isinstance(val, list | tuple) else max(map(getitem_index, getitems)) + 1
    outs = [-1] * count
    for g in getitems:
        outs[getitem_index(g)] = value_id(g)
    return outs, True
