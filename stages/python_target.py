"""Resolve a user's `_target_`: a dotted path (`pkg.mod.Name`) or a file form (`./file.py:Name`).

The file form needs no package or PYTHONPATH: the file is loaded as a standalone module under a
name derived from its path. Relative paths are taken from the directory the user ran from. The
model and the backend options share this, so both accept the same two forms.
"""

from __future__ import annotations

import hashlib
import importlib.util
import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

FILE_TARGET_SEPARATOR = ":"
_MODULE_PREFIX = "delegate_debugger_user_model_"


class TargetError(ValueError):
    """A `_target_` that names nothing importable; the message names the option."""


def split_file_target(target: str) -> tuple[str, str] | None:
    """('path/to/file.py', 'attr') for a file form, None for a dotted path."""
    path, sep, attr = target.rpartition(FILE_TARGET_SEPARATOR)
    if not sep or not path.endswith(".py"):
        return None
    return path, attr


def absolute_target(target: str, base_dir: Path) -> str:
    """The target with a relative file path made absolute against `base_dir`; dotted unchanged."""
    split = split_file_target(target)
    if split is None:
        return target
    path = Path(split[0]).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    return f"{path.resolve()}{FILE_TARGET_SEPARATOR}{split[1]}"


@dataclass(frozen=True)
class SettledTarget:
    """A `_target_` made absolute, with what is surely wrong with it, found without running it:
    the file form's missing file, or the name its source does not define (with what it does)."""

    absolute: str
    missing_file: str | None = None
    undefined: tuple[Path, str, list[str]] | None = None


def settle_target(target: str, base_dir: Path) -> SettledTarget:
    """`target` made absolute against `base_dir`, checked: its file exists, its name is defined."""
    absolute = absolute_target(target, base_dir)
    split = split_file_target(absolute)
    if split is not None and not Path(split[0]).is_file():
        return SettledTarget(absolute, missing_file=split[0])
    return SettledTarget(absolute, undefined=missing_target_name(absolute, base_dir))


def target_source_file(target: str, base_dir: Path) -> Path | None:
    """The Python file that defines the target (for fingerprints), found without running it."""
    split = split_file_target(absolute_target(target, base_dir))
    if split is not None:
        path = Path(split[0])
        return path if path.is_file() else None
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:cut]))
        except (ImportError, ValueError, AttributeError):
            continue
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            return Path(spec.origin)
        if spec is not None:
            return None
    return None


def file_module_name(path: Path) -> str:
    """The module name a file-form target's file is loaded under (stable per absolute path)."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    return f"{_MODULE_PREFIX}{path.stem}_{digest}"


def load_file_module(
    path: Path, option: str, error: type[Exception] = TargetError, *, reuse: bool = False
) -> ModuleType:
    """Run `path` as a module (registered in sys.modules first, so pickling and dataclasses find
    it); `reuse=True` returns the module an earlier call loaded. Errors name `option`."""
    if not path.is_file():
        raise error(
            f"{option}: no such file {path} (a relative path is taken from the directory you "
            "ran the command in)"
        )
    name = file_module_name(path)
    if reuse and name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise error(f"{option}: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise error(f"{option}: running {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def import_target(
    target: str,
    option: str,
    base_dir: Path,
    error: type[Exception] = TargetError,
    *,
    reuse: bool = False,
) -> Any:
    """The object `target` names; `error` naming `option` if it cannot be found."""
    split = split_file_target(absolute_target(target, base_dir))
    if split is not None:
        path, attr = split
        module = load_file_module(Path(path), f"{option}={target!r}", error, reuse=reuse)
        found = getattr(module, attr, None) if attr else None
        if found is None:
            names = sorted(n for n in vars(module) if not n.startswith("_"))
            raise error(
                f"{option}={target!r}: {path} defines no {attr!r} "
                f"(write it as FILE.py:NAME; the file defines: {', '.join(names)})"
            )
        return found
    if "." not in target:
        raise error(
            f"{option}={target!r} is neither a dotted path like 'pkg.module.Name' "
            "nor a file form like './my_file.py:Name'"
        )
    try:
        return pkgutil.resolve_name(target)
    except (ImportError, AttributeError) as exc:
        raise error(f"{option}={target!r}: cannot import it ({exc})") from exc
    except Exception as exc:  # the user's module raised while it was imported
        raise error(
            f"{option}={target!r}: importing it failed: {type(exc).__name__}: {exc}"
        ) from exc


MAX_SCANNED_SOURCE_BYTES = 8 << 20  # larger sources are left to the import that uses them


def _defined_names(source: Path) -> set[str] | None:
    """The top-level names a Python file binds, read without running it; None when that cannot
    be known statically (a module `__getattr__`, a star import, unreadable or huge source)."""
    import ast

    try:
        if source.stat().st_size > MAX_SCANNED_SOURCE_BYTES:
            return None
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except (OSError, SyntaxError, ValueError):
        return None  # the import reports a syntax error with its line
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
    return None if "__getattr__" in names or "globals" in _called(tree) else names


def _called(tree: Any) -> set[str]:
    """Names called anywhere in `tree` (`globals()[...] = ...` defines names no parse sees)."""
    import ast

    return {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def _module_source(module: str) -> Path | None:
    """The .py file of an importable module, found without importing it (None: not found, or
    not a plain source file)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def missing_target_name(target: str, base_dir: Path) -> tuple[Path, str, list[str]] | None:
    """(source file, missing name, the public functions and classes it defines) when `target`
    names something its source surely does not define, read without running it; else None."""
    import ast

    split = split_file_target(absolute_target(target, base_dir))
    if split is not None:
        source: Path | None = Path(split[0])
        attr = split[1]
    else:
        module, attr = _deepest_module(target)
        source = _module_source(module) if module else None
    if source is None or not source.is_file() or not attr.isidentifier():
        return None
    names = _defined_names(source)
    if names is None or attr in names:
        return None
    tree = ast.parse(source.read_bytes())
    callables = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    ]
    if source.name == "__init__.py":  # a package: its modules are names too
        callables += [m.name for m in pkgutil.iter_modules([str(source.parent)])]
    return source, attr, sorted(set(callables))


def _deepest_module(target: str) -> tuple[str, str]:
    """(the longest prefix of a dotted target that is a module, the name after it): for
    `pkg.typo.fn` where `pkg.typo` is no module, ('pkg', 'typo')."""
    module, _, attr = target.rpartition(".")
    while module and _module_source(module) is None and "." in module:
        module, _, attr = module.rpartition(".")
    return module, attr
