"""Functions stay short enough to read at once: none in stages/ or pipeline/ over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 60  # signature and docstring included


def test_no_function_in_stages_or_pipeline_is_over_the_limit() -> None:
    long = []
    for package in ("stages", "pipeline"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > LIMIT:
                        long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} {length}")
    assert not long, "split these functions:\n" + "\n".join(long)
