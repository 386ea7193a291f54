"""Source lines and module paths for the ops inside `torch.cond` branches.

torch.export traces a branch function into a subgraph whose ops carry the generated code's frame
(`<eval_with_key>.7:6`) and no module path. This pass finds the `torch.cond(...)` call in the
model's source (the cond node's own stack trace names it), resolves its branch functions with
`ast` (a name in the enclosing function or module, `self.method`, or a lambda), and gives each
branch op the frame of the line in that function that calls it (the branch function's first
line when no call matches), after the frames that led to the cond; the module path is the
cond's.
"""

from __future__ import annotations

import ast
import linecache
import operator
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n(?P<code>[^\n]*)')
_BINARY_OPS: dict[str, type[ast.operator]] = {
    "add": ast.Add,
    "sub": ast.Sub,
    "mul": ast.Mult,
    "div": ast.Div,
    "truediv": ast.Div,
    "floordiv": ast.FloorDiv,
    "matmul": ast.MatMult,
    "pow": ast.Pow,
    "mod": ast.Mod,
}
Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


@dataclass(frozen=True)
class _Branch:
    """A branch function in its file."""

    file: str
    name: str
    node: Function


@lru_cache(maxsize=32)
def _parse(file: str) -> ast.Module | None:
    try:
        return ast.parse(Path(file).read_text(), filename=file)
    except (OSError, SyntaxError, ValueError):
        return None


def _cond_call(tree: ast.Module, line: int) -> ast.Call | None:
    """The innermost `cond(...)` / `torch.cond(...)` call spanning `line`."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and n.lineno <= line <= (n.end_lineno or n.lineno)
        and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "cond"
    ]
    return max(calls, key=lambda n: n.lineno, default=None)


def _enclosing(
    tree: ast.Module, line: int, kind: type[ast.FunctionDef | ast.ClassDef]
) -> list[ast.stmt]:
    """Definitions of `kind` whose span holds `line`, innermost first."""
    found: list[ast.stmt] = [
        n
        for n in ast.walk(tree)
        if isinstance(n, kind) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return sorted(found, key=lambda n: n.lineno, reverse=True)


def _named_function(scopes: list[ast.AST], name: str, before: int) -> Function | None:
    """The last `def name` before the call, innermost scope first."""
    for scope in scopes:
        defs = [
            n
            for n in ast.walk(scope)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n is not scope
            and n.name == name
            and n.lineno <= before
        ]
        if defs:
            return max(defs, key=lambda n: n.lineno)
    return None


def _resolve(tree: ast.Module, file: str, line: int, expr: ast.expr) -> _Branch | None:
    if isinstance(expr, ast.Lambda):
        return _Branch(file, "<lambda>", expr)
    functions = _enclosing(tree, line, ast.FunctionDef)
    if isinstance(expr, ast.Name):
        found = _named_function([*functions, tree], expr.id, line)
        return _Branch(file, expr.id, found) if found is not None else None
    if isinstance(expr, ast.Attribute) and getattr(expr.value, "id", None) == "self":
        for cls in _enclosing(tree, line, ast.ClassDef):
            methods = [
                n
                for n in getattr(cls, "body", [])
                if isinstance(n, ast.FunctionDef) and n.name == expr.attr
            ]
            if methods:
                return _Branch(file, expr.attr, methods[0])
    return None


def _branches(file: str, line: int) -> tuple[_Branch | None, _Branch | None]:
    tree = _parse(file)
    call = _cond_call(tree, line) if tree is not None else None
    if tree is None or call is None:
        return None, None
    args: list[ast.expr | None] = [*call.args[1:3]]
    args += [None] * (2 - len(args))
    for keyword in call.keywords:
        if keyword.arg in ("true_fn", "false_fn"):
            args[0 if keyword.arg == "true_fn" else 1] = keyword.value
    true_fn, false_fn = (_resolve(tree, file, line, a) if a is not None else None for a in args)
    return true_fn, false_fn


def _callee(node: torch.fx.Node) -> str:
    """The function an op came from (`relu`, `mul`), from torch_fn or the op's name."""
    torch_fn = node.meta.get("torch_fn")
    if isinstance(torch_fn, tuple | list) and len(torch_fn) == 2:
        return str(torch_fn[1]).rsplit(".", 1)[-1]
    name = getattr(node.target, "__name__", str(node.target))
    return name.split(".")[0].rstrip("_")


def _candidate_lines(branch: _Branch, callee: str) -> list[int]:
    """Lines of the branch function that call `callee` (by name, or as a binary operator)."""
    binary = _BINARY_OPS.get(callee)
    lines = []
    for n in ast.walk(branch.node):
        func = getattr(n, "func", None)
        name = getattr(func, "attr", None) or getattr(func, "id", None)
        called = isinstance(n, ast.Call) and name == callee
        operated = binary is not None and isinstance(n, ast.BinOp) and isinstance(n.op, binary)
        if (called or operated) and isinstance(n, ast.expr):
            lines.append(n.lineno)
    return sorted(lines)


def _branch_frame(branch: _Branch, line: int) -> str:
    code = linecache.getline(branch.file, line).strip()
    return f'  File "{branch.file}", line {line}, in {branch.name}\n    {code}\n'


def _outer_frames(stack_trace: str) -> str:
    """The cond's stack trace without frames of generated code (what led to the cond call)."""
    kept = [m.group(0) for m in _FRAME.finditer(stack_trace) if not m["file"].startswith("<")]
    return "".join(f"  {frame.strip()}\n" for frame in kept)


def _annotate(cond: torch.fx.Node, owner: torch.fx.GraphModule, branches: tuple) -> None:
    trace = str(cond.meta.get("stack_trace") or "")
    outer = _outer_frames(trace)
    module_stack = cond.meta.get("nn_module_stack")
    for get_attr, branch in zip(cond.args[1:3], branches, strict=True):
        if not isinstance(get_attr, torch.fx.Node) or branch is None:
            continue
        sub = getattr(owner, str(get_attr.target), None)
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        seen: dict[str, int] = {}
        for node in sub.graph.nodes:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            callee = _callee(node)
            lines = _candidate_lines(branch, callee)
            index = seen.get(callee, 0)
            seen[callee] = index + 1
            line = lines[min(index, len(lines) - 1)] if lines else branch.node.lineno
            node.meta["stack_trace"] = outer + _branch_frame(branch, line)
            if module_stack and not node.meta.get("nn_module_stack"):
                node.meta["nn_module_stack"] = dict(module_stack)
        _annotate_conds(sub)


def _annotate_conds(module: torch.fx.GraphModule) -> None:
    for node in module.graph.nodes:
        if node.op != "call_function" or node.target is not torch.ops.higher_order.cond:
            continue
        frames = [
            m
            for m in _FRAME.finditer(str(node.meta.get("stack_trace") or ""))
            if not m["file"].startswith("<")
        ]
        if not frames:
            continue
        _annotate(node, module, _branches(frames[-1]["file"], int(frames[-1]["line"])))


def annotate_branch_sources(program: torch.export.ExportedProgram) -> None:
    """Give every op inside a cond branch its branch function's source line and module path."""
    _annotate_conds(program.graph_module)
