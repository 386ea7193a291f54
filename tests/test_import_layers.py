"""The import rules of docs/architecture.md, checked by walking every import with ast (lazy
imports inside functions and TYPE_CHECKING blocks included)."""

from __future__ import annotations

import pytest

from pipeline.import_graph import direct_imports, project_modules

MODULES = project_modules("stages") + project_modules("pipeline")
GRAPH = {module: direct_imports(module) for module in MODULES}
STAGE_PACKAGES = ("formats", "backends", "export", "lower", "run", "analyze")
# Which parts each part of stages/ may import (besides itself). Top-level helper modules of
# stages/ (stages.percentiles, ...) import only stages.formats.
MAY_IMPORT: dict[str, set[str]] = {
    "stages.formats": set(),
    "stages.helpers": {"stages.formats"},
    "stages.backends": {"stages.formats", "stages.helpers"},
    "stages.export": {"stages.formats", "stages.helpers"},
    "stages.lower": {"stages.formats", "stages.helpers", "stages.backends"},
    "stages.run": {"stages.formats", "stages.helpers", "stages.backends"},
    "stages.analyze": {"stages.formats", "stages.helpers", "stages.backends"},
    "pipeline": {f"stages.{p}" for p in STAGE_PACKAGES} | {"stages.helpers", "conf"},
}


def part_of(module: str) -> str:
    """stages.<package>, 'stages.helpers' for a top-level stages module, or the top package."""
    parts = module.split(".")
    if parts[0] != "stages":
        return parts[0]
    if len(parts) > 1 and parts[1] in STAGE_PACKAGES:
        return f"stages.{parts[1]}"
    return "stages.helpers"


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


@pytest.mark.parametrize("module", MODULES)
def test_a_module_imports_only_what_its_layer_may(module: str) -> None:
    mine = part_of(module)
    allowed = MAY_IMPORT[mine] | {mine}
    offending = sorted(t for t in GRAPH[module] if part_of(t) not in allowed)
    assert not offending, (
        f"{module} ({mine}) imports {offending}; {mine} may import {sorted(allowed)}"
    )


def test_no_import_cycles_in_pipeline_and_stages() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_walker_sees_lazy_imports_and_finds_a_planted_cycle() -> None:
    # stages.formats.etrecord imports handle_info at module level; the registry is lazy.
    assert "stages.formats.handle_info" in GRAPH["stages.formats.etrecord"]
    assert "stages.backends.backend_api" in GRAPH["stages.analyze.metadata_parsers"]
    planted = {
        **GRAPH,
        "stages.formats.artifacts": GRAPH["stages.formats.artifacts"] | {"stages.formats.etrecord"},
    }
    planted["stages.formats.handle_info"] = planted["stages.formats.handle_info"] | {
        "stages.formats.artifacts"
    }
    cycle = find_cycle(planted)
    assert cycle is not None and cycle[0] == cycle[-1]
