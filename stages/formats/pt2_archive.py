"""torch.export archives (.pt2) checked against torch 2.13's layout before torch reads a byte.

torch.export.save writes, under one root directory: `archive_format`, `archive_version`,
`byteorder`, `.data/version`, `.data/serialization_id`, `models/model.json` (the graph),
`data/sample_inputs/model.pt` (a torch.save zip), `data/{weights,constants}/model_*_config.json`
(which payload file holds which tensor, raw or pickled) and the payloads `weight_N` / `tensor_N`.
torch.export.load unpickles with weights_only=False every payload a config marks `use_pickle`,
every `custom_obj_`/`opaque_obj_` constant and legacy `model.pt` weights, and on fallback the
sample inputs; it evaluates symbolic shape expressions with sympy.sympify (an eval) and resolves
node targets by attribute path. So only these members pass, payloads must be declared raw tensor
bytes (decided by the config, never by their first byte), sample inputs must be weights-only,
targets and expressions come from a closed grammar, and torch reads a zip rebuilt from the
checked bytes.
"""

from __future__ import annotations

import io
import json
import math
import operator
import re
from collections.abc import Iterator
from typing import Any

import torch

from stages.safe_io.bounded_zip import BoundedZip, ZipLimitError
from stages.safe_io.tensor_file import UnsafePayloadError, load_tensors, repack_stored

MODEL = "model"
_FIXED_TEXT = {
    "archive_format": {"pt2"},
    "archive_version": {"0"},
    "byteorder": {"little"},
    ".data/version": None,
    ".data/serialization_id": None,
}
_GRAPH = f"models/{MODEL}.json"
_SAMPLE_INPUTS = f"data/sample_inputs/{MODEL}.pt"
_CONFIGS = {
    f"data/weights/{MODEL}_weights_config.json": ("data/weights/", "weight_"),
    f"data/constants/{MODEL}_constants_config.json": ("data/constants/", "tensor_"),
}
_PICKLED_PREFIXES = ("custom_obj_", "opaque_obj_")
_SMALL_TEXT = 256

_NAME = r"[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9][A-Za-z0-9_]*"
# ATen's bitwise ops keep their dunder names (`aten.__and__.Tensor`); no other dunder is an op.
_ATEN_DUNDER = r"__i?(and|or|xor|lshift|rshift)__"
# Operator namespaces a graph may call: ATen, prims, higher-order ops, and the quantize /
# dequantize / choose-qparams ops PT2E quantization emits (`quantized_decomposed`: torch.ao and
# torchao's pt2e flow; `torchao`: its affine quantization ops). Each is a library of registered
# kernels; any other namespace could be a Python-defined op and is refused.
OPERATOR_NAMESPACES = ("aten", "prims", "higher_order", "quantized_decomposed", "torchao")
_OP_TARGET = re.compile(
    rf"torch\.ops\.({'|'.join(OPERATOR_NAMESPACES)})\.({_NAME}|{_ATEN_DUNDER})(\.({_NAME}))?"
)
_OPERATOR_TARGETS = {
    f"_operator.{name}"
    for name in [
        *["getitem", "add", "mul", "sub", "truediv", "floordiv", "mod", "pow", "neg", "abs"],
        *["ge", "le", "gt", "lt", "eq", "ne", "and_", "or_", "not_", "lshift", "rshift"],
    ]
}
_OTHER_TARGETS = {"math.ceil", "math.floor", "math.trunc", "builtins.round"} | {
    f"torch.sym_{name}" for name in ["int", "float", "ite", "max", "min", "not", "sqrt", "sum"]
}
BUILTIN_OPS: set[object] = (
    {getattr(operator, name.removeprefix("_operator.")) for name in _OPERATOR_TARGETS}
    | {math.ceil, math.floor, math.trunc, round}
    | {getattr(torch, name.removeprefix("torch.")) for name in _OTHER_TARGETS if "sym_" in name}
)

# Symbolic shape expressions: numbers, shape symbols (s0, u3, ...), operators, and the sympy /
# torch functions torch's deserializer names; nothing that can reach a builtin or an attribute.
_EXPR_TOKEN = re.compile(r"\s+|\d+(\.\d+)?|[A-Za-z_][A-Za-z0-9_]*|\*\*|//|[=!<>]=|[-+*/%(),<>&|~]")
_SYMBOL = re.compile(r"[a-z]{1,8}\d+")
# torch writes an unbacked float symbol (from `.item()`) as Symbol('zuf0'): a named symbol, no call.
_QUOTED_SYMBOL = re.compile(
    r"Symbol\('([a-z]{1,8}\d+)'(?:, ?(?:integer|real|positive|nonnegative|finite)=(?:True|False))*\)"
)
# Functions whose result size can explode from a short string (PowByNatural, LShift, ...) are out.
_EXPR_FUNCTIONS = {
    *["FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilDiv"],
    *["CeilToInt", "FloorToInt", "TruncToFloat", "TruncToInt", "RoundToInt", "ToFloat"],
    *["FloatTrueDiv", "IntTrueDiv", "Identity", "IsNonOverlappingAndDenseIndicator"],
    *["Max", "Min", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or", "Not", "Abs"],
    *["floor", "ceiling", "sqrt", "oo", "zoo", "nan", "True", "False", "Piecewise"],
    # sympy's arithmetic nodes, as torch writes a dynamic dimension's products (`Mul(Integer(64),
    # s27)`: a view of a generation program's token count times its width)
    *["Add", "Mul", "Pow", "Integer", "Rational"],
}
_MAX_NUMBER = 30  # digits
_MAX_EXPR = 4096


def verified_pt2_bytes(data: bytes, what: str) -> bytes:
    """Check a torch.export archive member by member; the rebuilt zip torch may then load."""
    return _verified(data, what, repack=True)


def check_pt2_members(data: bytes, what: str) -> None:
    """The same checks as `verified_pt2_bytes`, for a caller that keeps the archive unloaded."""
    _verified(data, what, repack=False)


def _verified(data: bytes, what: str, repack: bool) -> bytes:
    try:
        with BoundedZip(data, what) as archive:
            root = _single_root(archive.names(), what)
            members = {name[len(root) + 1 :]: name for name in archive.names()}
            raw_payloads = _check_members(archive, members, what)
            unexpected = sorted(set(members) - _KNOWN - raw_payloads)
            if unexpected:
                raise UnsafePayloadError(_unexpected(unexpected[0], what))
            return repack_stored(archive) if repack else b""
    except ZipLimitError as exc:
        raise UnsafePayloadError(str(exc)) from exc


_KNOWN = set(_FIXED_TEXT) | {_GRAPH, _SAMPLE_INPUTS} | set(_CONFIGS)


def _single_root(names: list[str], what: str) -> str:
    roots = {name.split("/", 1)[0] for name in names}
    if len(roots) != 1 or any("/" not in name for name in names):
        raise UnsafePayloadError(f"{what} is not a torch.export archive (no single root folder)")
    return roots.pop()


def _check_members(archive: BoundedZip, members: dict[str, str], what: str) -> set[str]:
    """Check every known member; return the payload files the configs declare as raw tensors."""
    for name, allowed in _FIXED_TEXT.items():
        if name in members:
            text = _small_text(archive, members[name], what)
            if allowed is not None and text not in allowed:
                raise UnsafePayloadError(
                    f"{what} member {members[name]} is {text!r}; expected one of {sorted(allowed)} "
                    "(a torch.export archive of another version or layout)"
                )
    for name in ("archive_format", "archive_version", _GRAPH, _SAMPLE_INPUTS, *_CONFIGS):
        if name not in members:
            raise UnsafePayloadError(f"{what} is not a torch.export archive (no member {name})")
    inputs = load_tensors(archive.read(members[_SAMPLE_INPUTS]), f"{what} member {_SAMPLE_INPUTS}")
    if not isinstance(inputs, tuple | dict):
        raise UnsafePayloadError(f"{what} member {_SAMPLE_INPUTS} is not a tuple of sample inputs")
    check_graph_json(_json(archive, members[_GRAPH], what), f"{what} member {_GRAPH}")
    raw: set[str] = set()
    for config_name, (directory, prefix) in _CONFIGS.items():
        config = _json(archive, members[config_name], what)
        for path in _raw_payloads(config, prefix, f"{what} member {config_name}"):
            member = directory + path
            if member not in members:
                raise UnsafePayloadError(
                    f"{what} member {config_name} names payload {path}, which is missing"
                )
            raw.add(member)
        _check_empty_payloads(config, archive, members, directory, f"{what} member {config_name}")
    return raw


def _raw_payloads(config: Any, prefix: str, what: str) -> Iterator[str]:
    """Payload files of a weights/constants config, each declared raw (never pickled)."""
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise UnsafePayloadError(f"{what} is not a payload config")
    for fqn, meta in entries.items():
        if not isinstance(meta, dict) or not isinstance(meta.get("path_name"), str):
            raise UnsafePayloadError(f"{what}: entry {fqn!r} has no path_name")
        path = meta["path_name"]
        if path.startswith(_PICKLED_PREFIXES):
            raise UnsafePayloadError(
                f"{what}: constant {fqn!r} is an opaque/pickled Python object ({path}); "
                "loading it would unpickle arbitrary code, so it is refused"
            )
        if meta.get("use_pickle") is not False:
            raise UnsafePayloadError(
                f"{what}: tensor {fqn!r} is stored pickled (use_pickle: true, {path}); only raw "
                "tensor bytes are read, so it is refused"
            )
        if not re.fullmatch(rf"{prefix}\d+", path) or not isinstance(meta.get("tensor_meta"), dict):
            raise UnsafePayloadError(f"{what}: entry {fqn!r} names {path!r}, not a raw {prefix}N")
        yield path


def _check_empty_payloads(
    config: dict[str, Any], archive: BoundedZip, members: dict[str, str], directory: str, what: str
) -> None:
    """torch allocates torch.zeros(declared sizes) for an empty payload: it must declare 0 elements."""
    for fqn, meta in config["config"].items():
        if archive.member_size(members[directory + meta["path_name"]]) != 0:
            continue
        sizes = meta["tensor_meta"].get("sizes", [])
        numel = 1
        for size in sizes if isinstance(sizes, list) else [None]:
            value = size.get("as_int") if isinstance(size, dict) else None
            if not isinstance(value, int) or value < 0:
                raise UnsafePayloadError(f"{what}: tensor {fqn!r} declares a non-integer size")
            numel *= value
        if numel:
            raise UnsafePayloadError(
                f"{what}: tensor {fqn!r} declares {numel} elements but its payload is empty"
            )


def check_graph_json(
    document: Any, what: str, extra_targets: re.Pattern[str] | None = None
) -> list[str]:
    """Every node target and symbolic expression in a serialized graph is from a closed set.

    `extra_targets` admits another dialect's op names (ExecuTorch's edge ops). Returns the string
    arguments that hold nested JSON (a lowered module's serialized program), for the caller.
    """
    nested: list[str] = []
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            if key in ("target", "as_operator") and isinstance(value, str):
                if not (extra_targets and extra_targets.fullmatch(value)):
                    check_target_name(value, what)
            elif key == "as_string" and isinstance(value, str) and value.startswith("{"):
                nested.append(value)
            elif key == "expr_str":
                check_sym_expr(value, what)
            elif key in ("as_custom_obj", "class_fqn"):
                raise UnsafePayloadError(
                    f"{what}: the graph uses a custom (opaque, pickled) object; refused"
                )
            elif isinstance(value, dict | list):
                stack.append(value)
    return nested


def check_target_name(target: str, what: str) -> None:
    """An op of `OPERATOR_NAMESPACES` or one of the builtins torch.export emits for shapes."""
    match = _OP_TARGET.fullmatch(target)
    if match or target in _OPERATOR_TARGETS or target in _OTHER_TARGETS:
        return
    raise UnsafePayloadError(
        f"{what}: node target {target[:80]!r} is not an operator of the known namespaces "
        f"({', '.join(OPERATOR_NAMESPACES)}); refused (loading it could call arbitrary Python)"
    )


def check_sym_expr(expr: Any, what: str) -> None:
    """A shape expression sympy can parse without reaching any builtin (sympify is an eval)."""
    if not isinstance(expr, str) or len(expr) > _MAX_EXPR:
        raise UnsafePayloadError(f"{what}: a symbolic shape expression is not a short string")
    expr = _QUOTED_SYMBOL.sub(r"\1", expr)
    position, previous = 0, ""
    while position < len(expr):
        token = _EXPR_TOKEN.match(expr, position)
        if token is None:
            raise UnsafePayloadError(
                f"{what}: symbolic shape expression {expr[:80]!r} has a character outside the "
                "shape grammar; refused (torch would eval it)"
            )
        word = token.group()
        _check_expr_token(word, previous, expr, what)
        if not word.isspace():
            previous = word
        position = token.end()


def _check_expr_token(word: str, previous: str, expr: str, what: str) -> None:
    """Names are shape symbols or shape functions; numbers and exponents stay small."""
    why = ""
    if (word[0].isalpha() or word[0] == "_") and not (
        _SYMBOL.fullmatch(word) or word in _EXPR_FUNCTIONS
    ):
        why = f"names {word!r}, which is not a shape symbol or shape function"
    elif word[0].isdigit() and len(word) > _MAX_NUMBER:
        why = "has a number too long for a shape"
    elif previous == "**" and not (word.isdigit() and len(word) <= 2):
        why = "raises to a power other than a small integer"
    if why:
        raise UnsafePayloadError(
            f"{what}: symbolic shape expression {expr[:80]!r} {why}; refused (torch evaluates it)"
        )


def check_program_targets(program: torch.export.ExportedProgram, what: str) -> None:
    """After loading: every call is an op overload or a shape builtin; constants are tensors."""
    for module in program.graph_module.modules():
        graph = getattr(module, "graph", None)
        for node in graph.nodes if isinstance(graph, torch.fx.Graph) else ():
            if node.op != "call_function":
                continue
            target = node.target
            if isinstance(target, torch._ops.HigherOrderOperator):
                continue
            if (
                isinstance(target, torch._ops.OpOverload)
                and target.namespace in OPERATOR_NAMESPACES
            ):
                continue
            if target in BUILTIN_OPS:
                continue
            raise UnsafePayloadError(f"{what}: node {node.name} calls {target!r}; refused")
    for name, value in program.constants.items():
        if not isinstance(value, torch.Tensor):
            raise UnsafePayloadError(
                f"{what}: constant {name!r} is a {type(value).__name__}, not a tensor; refused"
            )


def _small_text(archive: BoundedZip, member: str, what: str) -> str:
    if archive.member_size(member) > _SMALL_TEXT:
        raise UnsafePayloadError(f"{what} member {member} is too large for a marker file")
    return archive.read(member).decode("utf-8", errors="replace").strip()


def _json(archive: BoundedZip, member: str, what: str) -> Any:
    raw = archive.read(member)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        kind = "a pickle" if raw[:1] == b"\x80" else "not JSON"
        raise UnsafePayloadError(f"{what} member {member} is {kind}; refused") from exc


def _unexpected(name: str, what: str) -> str:
    base = name.rsplit("/", 1)[-1]
    if base.startswith(_PICKLED_PREFIXES):
        why = "an opaque/pickled constant torch would unpickle"
    elif name.startswith("data/aotinductor/"):
        why = "compiled code torch would load"
    elif name.endswith(".pt"):
        why = "a legacy pickled weights file torch would unpickle"
    else:
        why = "not part of a torch.export archive this tool reads"
    return f"{what} member {name} is {why}; refused"


def check_pt2_archive(data: bytes, what: str) -> bytes:
    """Refuse a torch.export archive with anything torch would unpickle or eval; the clean bytes."""
    return verified_pt2_bytes(data, what)


def load_exported_program_bytes(data: bytes, what: str) -> torch.export.ExportedProgram:
    """torch.export.load of a checked archive, then every call target checked once more."""
    clean = verified_pt2_bytes(data, what)
    try:
        program = torch.export.load(io.BytesIO(clean))
    except Exception as exc:  # torch raises SerializeError, RuntimeError, KeyError, ...
        raise UnsafePayloadError(
            f"{what} is not a loadable torch.export program ({type(exc).__name__}: "
            f"{str(exc).strip()[:200]})"
        ) from exc
    check_program_targets(program, what)
    return program
