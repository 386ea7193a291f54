"""The public backend module: what the example imports, and names built-ins label runs with."""

from __future__ import annotations

import ast
import pkgutil

import pytest

import stages.backends.api as api
from stages.backends.backend_registry import BUILTIN_BACKEND_NAMES, REGISTERED_BACKENDS
from tests.helpers.cli_runner import REPO

EXAMPLE = REPO / "docs" / "examples" / "npu_backend.py"


def test_the_example_backend_imports_only_the_public_module() -> None:
    tree = ast.parse(EXAMPLE.read_text())
    project = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.split(".")[0] in ("stages", "pipeline", "conf")
    ]
    plain = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.split(".")[0] in ("stages", "pipeline", "conf")
    ]
    assert project == ["stages.backends.api"] and not plain
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "stages.backends.api"
        for alias in node.names
    }
    assert imported <= set(api.__all__)


@pytest.mark.parametrize("target", sorted(REGISTERED_BACKENDS.values()))
def test_builtin_names_are_the_classes_own(target: str) -> None:
    assert BUILTIN_BACKEND_NAMES[target] == pkgutil.resolve_name(target).name


def test_every_public_name_is_in_the_guides_table() -> None:
    """The guide's table lists each name of `stages.backends.api` (op_name was missing)."""
    guide = (REPO / "docs" / "delegate_authors.md").read_text()
    rows = [line for line in guide.splitlines() if line.startswith("| `")]
    missing = [name for name in api.__all__ if not any(f"`{name}`" in row for row in rows)]
    assert missing == []


def test_the_guide_says_which_graph_form_preprocess_sees_and_what_getitems_do() -> None:
    guide = (REPO / "docs" / "delegate_authors.md").read_text()
    assert "`aten.linear.default`, `aten.layer_norm.default`" in guide
    assert "**`getitem` nodes**" in guide and "never offered to\n`unsupported_reason`" in guide
