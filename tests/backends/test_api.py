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
