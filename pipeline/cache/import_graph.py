"""The project's own import graph, read with `ast`: the files a stage's code version covers.

From a stage's entry module, every module of the project's packages it reaches: `import` and
`from ... import` statements at any depth (lazy imports inside functions too), the packages whose
`__init__` those imports run, quoted dotted paths naming a project module (the backend registry,
`_target_` defaults), and quoted data-file names of files next to the module (`*.fbs`, `*.yaml`,
`*.json`). Import statements are parsed from the lines that start them (the whole file when an
`import` hides elsewhere); parses and hashes are cached per process, keyed by size and mtime.
"""

from __future__ import annotations

import ast
import hashlib
import re
from functools import cache
from pathlib import Path

PROJECT_PACKAGES: tuple[str, ...] = ("stages", "pipeline", "conf")
# The directory holding the project's packages; a test may point it at a copy of the project.
PROJECT_ROOT: Path = Path(__file__).resolve().parents[2]
DATA_SUFFIXES = (".fbs", ".yaml", ".yml", ".json")
# A quoted dotted path into a project package ("stages.backends.xnnpack.XnnpackBackend").
_PROJECT_STRING = re.compile(
    r"""(?<=["'])((?:""" + "|".join(PROJECT_PACKAGES) + r""")(?:\.[A-Za-z_]\w*)+)(?=["'])"""
)
# A quoted file name with a data suffix ("schema.fbs").
_DATA_STRING = re.compile(
    r"""(?<=["'])([\w.-]+(?:""" + "|".join(map(re.escape, DATA_SUFFIXES)) + r"""))(?=["'])"""
)


def module_file(module: str, root: Path) -> Path | None:
    """The source file of a project module (`a.b` -> a/b.py or a/b/__init__.py), if any."""
    if module.split(".")[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _absolute(module: str | None, level: int, package: str) -> str:
    """The absolute name of `from <level dots><module> import ...` inside `package`."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - level + 1])
    return f"{base}.{module}" if module else base


def _prefixes(dotted: str) -> list[str]:
    """'a.b.C' -> ['a', 'a.b', 'a.b.C']: a dotted string may end in an attribute."""
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _import_statements(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth of statements (functions, classes, if/try/with)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, ast.Import | ast.ImportFrom):
            found.append(statement)
            continue
        for name in ("body", "orelse", "finalbody"):
            pending.extend(getattr(statement, name, ()))
        for handler in getattr(statement, "handlers", ()):
            pending.extend(handler.body)
        for case in getattr(statement, "cases", ()):
            pending.extend(case.body)
    return found


# A line that may start an import statement, and the keyword every import statement holds.
_STATEMENT_START = re.compile(r"^[ \t]*(?:import|from)[ \t]")
_IMPORT_WORD = re.compile(r"\bimport\b")


def _statement_at(lines: list[str], first: int) -> tuple[str, int]:
    """The statement starting at line `first` (open brackets and backslashes continue it), and
    the index of its last line."""
    last, text = first, lines[first].strip()
    depth = text.count("(") - text.count(")")
    while (depth > 0 or text.endswith("\\")) and last + 1 < len(lines):
        last += 1
        text += "\n" + lines[last]
        depth += lines[last].count("(") - lines[last].count(")")
    return text, last


def import_tree(source: str, filename: str) -> ast.Module:
    """The file's import statements as a module to walk, parsed from the lines that start them
    (a tenth of parsing the file). When some `import` keyword of the file is in no such line (an
    import after `;` or `if x:`, or the word in prose) the whole file is parsed instead, so no
    import is ever missed; a line of a string that reads as an import only adds a name."""
    lines, kept, accounted = source.splitlines(), [], 0
    index = 0
    while index < len(lines):
        if not _STATEMENT_START.match(lines[index]):
            index += 1
            continue
        text, index = _statement_at(lines, index)
        index += 1
        try:
            body = ast.parse(text).body
        except SyntaxError:
            continue  # prose that starts with "from" (an import would parse)
        if body and all(isinstance(node, ast.Import | ast.ImportFrom) for node in body):
            kept.extend(body)
            accounted += len(_IMPORT_WORD.findall(text))
    if accounted != len(_IMPORT_WORD.findall(source)):
        return ast.parse(source, filename=filename)
    return ast.Module(body=kept, type_ignores=[])


def _names(tree: ast.Module, source: str, package: str) -> set[str]:
    """Candidate module names: what imports name, and string literals naming project modules."""
    names: set[str] = set()
    for node in _import_statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(_prefixes(alias.name))
        else:
            base = _absolute(node.module, node.level, package)
            names.update(_prefixes(base))
            names.update(f"{base}.{alias.name}" for alias in node.names)
    for text in _PROJECT_STRING.findall(source):
        names.update(_prefixes(text))
    return names


def direct_imports(module: str, root: Path | None = None) -> set[str]:
    """The project modules one module imports, at any depth of its code (lazy imports too).

    `from pkg import name` imports pkg.name when that is a module, else pkg (its __init__)."""
    root = root or PROJECT_ROOT
    path = module_file(module, root)
    if path is None:
        raise ValueError(f"{module} is not a module of the project under {root}")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_statements(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        else:
            base = _absolute(node.module, node.level, package)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                targets.add(name if module_file(name, root) is not None else base)
    return {t for t in targets if module_file(t, root) is not None} - {module}


def project_modules(package: str, root: Path | None = None) -> list[str]:
    """Every module of a project package (its __init__ as the package name), sorted."""
    root = root or PROJECT_ROOT
    modules = []
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


@cache
def _references(
    path: Path, module: str, root: Path, size: int, mtime_ns: int
) -> tuple[frozenset[str], frozenset[str]]:
    """(project modules, data files) one module references; cached per file version."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    source = path.read_text(encoding="utf-8")
    names = _names(import_tree(source, str(path)), source, package)
    modules = frozenset(n for n in names if module_file(n, root) is not None)
    data = frozenset(
        str(path.parent / s) for s in _DATA_STRING.findall(source) if (path.parent / s).is_file()
    )
    return modules, data


def _stat_key(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def reachable_files(entry: str, root: Path | None = None) -> list[Path]:
    """Every project source and data file the entry module reaches, sorted."""
    root = root or PROJECT_ROOT
    seen: set[str] = set()
    files: set[Path] = set()
    pending = _prefixes(entry)
    while pending:
        module = pending.pop()
        path = module_file(module, root)
        if module in seen or path is None:
            continue
        seen.add(module)
        files.add(path)
        modules, data = _references(path, module, root, *_stat_key(path))
        files.update(Path(d) for d in data)
        pending.extend(modules - seen)
    return sorted(files)


@cache
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def code_version(entries: tuple[str, ...], root: Path | None = None) -> str:
    """Hash of the relative paths and bytes of every file the entry modules reach."""
    root = root or PROJECT_ROOT
    digest = hashlib.sha256()
    files = sorted({path for entry in entries for path in reachable_files(entry, root)})
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(_file_digest(path, *_stat_key(path)).encode())
    return digest.hexdigest()[:16]
