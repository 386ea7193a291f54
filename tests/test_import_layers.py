"""The import rules of docs/architecture.md: import-linter's contracts, and no cycles in the
project's own import graph (the one stage fingerprints are computed from)."""

from __future__ import annotations

from pathlib import Path

import pytest
from importlinter.cli import lint_imports

from pipeline.cache.import_graph import direct_imports, project_modules

MODULES = project_modules("stages") + project_modules("pipeline")
GRAPH = {module: direct_imports(module) for module in MODULES}
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_import_linter_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    """The layer contracts in pyproject.toml ([tool.importlinter]) hold for the whole project."""
    status = lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert status == 0, out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_no_import_cycles_in_pipeline_and_stages() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_walker_sees_lazy_imports_and_finds_a_planted_cycle() -> None:
    # stages.formats.etrecord imports handle_info at module level; the registry is lazy.
    assert "stages.handles.handle_info" in GRAPH["stages.formats.etrecord"]
    assert "stages.backends.backend_api" in GRAPH["stages.analyze.link.metadata_parsers"]
    planted = {
        **GRAPH,
        "stages.formats.artifacts": GRAPH["stages.formats.artifacts"] | {"stages.formats.etrecord"},
    }
    planted["stages.handles.handle_info"] = planted["stages.handles.handle_info"] | {
        "stages.formats.artifacts"
    }
    cycle = find_cycle(planted)
    assert cycle is not None and cycle[0] == cycle[-1]


def test_the_mlflow_contract_covers_every_package_but_tracking() -> None:
    """A new pipeline package or module is a source of the 'only pipeline.tracking' contract."""
    import tomllib

    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (mlflow_rule,) = [c for c in contracts if "mlflow" in c.get("forbidden_modules", [])]
    top_level = {".".join(m.split(".")[:2]) for m in project_modules("pipeline") if "." in m}
    assert set(mlflow_rule["source_modules"]) >= (top_level - {"pipeline.tracking"}) | {"stages"}
    assert "pipeline.tracking" not in mlflow_rule["source_modules"]
