"""The import statements read from the lines that start them: never fewer than parsing the whole
file finds (on every file of the project, and where an import hides mid-line)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.cache.import_graph import PROJECT_PACKAGES, PROJECT_ROOT, import_tree


def _imports(tree: ast.Module) -> set[str]:
    """Each import statement anywhere in the tree, as text (positions left out)."""
    return {
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
    }


def test_every_project_file_gives_the_imports_the_whole_file_gives() -> None:
    files = [p for package in PROJECT_PACKAGES for p in (PROJECT_ROOT / package).rglob("*.py")]
    assert len(files) > 100
    for path in files:
        source = path.read_text(encoding="utf-8")
        assert _imports(import_tree(source, str(path))) == _imports(ast.parse(source)), path


@pytest.mark.parametrize(
    "source",
    [
        "x = 1; import stages.formats\n",
        "if True: import stages.handles\n",
        "from stages import (\n    formats,  # one\n    handles,\n)\n",
        "def f():\n    from stages.safe_io import \\\n        atomic_write\n",
        "try:\n    import stages.run\nexcept ImportError:\n    pass\nfrom x import y; z = 1\n",
        '"""\nfrom the file, the words\n"""\nimport stages.lower\n',
    ],
    ids=["after-semicolon", "one-line-if", "brackets", "backslash", "mixed-line", "prose"],
)
def test_an_import_anywhere_is_found(source: str) -> None:
    assert _imports(import_tree(source, "<test>")) >= _imports(ast.parse(source))


def test_a_file_without_imports_gives_an_empty_module(tmp_path: Path) -> None:
    assert import_tree("x = 1\n", "<test>").body == []
