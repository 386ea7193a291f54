"""A stage's code version is what it imports: edit a module a stage imports and it reruns."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict

from pipeline.cache import import_graph
from pipeline.cache.import_graph import code_version, reachable_files
from pipeline.runner import run_pipeline

STAGES = ("export", "lower", "run", "analyze")


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_graph_follows_every_kind_of_reference(tmp_path: Path) -> None:
    """Module-level, relative, lazy (in a function) imports, registry strings, data files."""
    _write(tmp_path, "stages/__init__.py", "")
    _write(tmp_path, "stages/pkg/__init__.py", "")
    _write(
        tmp_path,
        "stages/pkg/entry.py",
        "from stages.pkg import eager\nfrom . import relative\n"
        "def later():\n    from stages.pkg.lazy import thing\n    return thing\n"
        'REGISTRY = {"x": "stages.pkg.plugin.Backend"}\nSCHEMA = "schema.fbs"\n',
    )
    for name in ("eager", "relative", "lazy", "plugin", "unused"):
        _write(tmp_path, f"stages/pkg/{name}.py", "thing = Backend = 1\n")
    _write(tmp_path, "stages/pkg/schema.fbs", "table T {}\n")
    found = {str(p.relative_to(tmp_path)) for p in reachable_files("stages.pkg.entry", tmp_path)}
    expected = {"stages/__init__.py", "stages/pkg/__init__.py", "stages/pkg/entry.py"}
    expected |= {f"stages/pkg/{n}.py" for n in ("eager", "relative", "lazy", "plugin")}
    assert found == expected | {"stages/pkg/schema.fbs"}

    before = code_version(("stages.pkg.entry",), tmp_path)
    (tmp_path / "stages/pkg/unused.py").write_text("changed = 1\n")
    assert code_version(("stages.pkg.entry",), tmp_path) == before
    (tmp_path / "stages/pkg/schema.fbs").write_text("table T { x: int; }\n")
    assert code_version(("stages.pkg.entry",), tmp_path) != before


def _statuses(cfg: DictConfig) -> dict[str, tuple[str, str]]:
    result = run_pipeline(cfg, print_summary=False)
    return {o.name: (o.status, o.reason) for o in result.stages}


# (module edited, the stages that import it); edits go from the last stage to the first, so every
# stage before the first importer must still be reused.
EDITS = [
    ("stages/analyze/compare/verdict.py", {"analyze"}),
    ("stages/run/event_tracer.py", {"run"}),
    ("stages/backends/xnnpack.py", {"lower", "run", "analyze"}),  # only named in the registry
    ("stages/lower/partitioner.py", {"lower"}),
    ("stages/safe_io/atomic_write.py", {"export", "lower", "run", "analyze"}),
]


def test_editing_a_module_reruns_the_stages_that_import_it(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "project"
    for package in import_graph.PROJECT_PACKAGES:
        shutil.copytree(
            import_graph.PROJECT_ROOT / package,
            copy / package,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    # The runner fingerprints the copy; the code that runs is the installed one.
    monkeypatch.setattr(import_graph, "PROJECT_ROOT", copy)
    cfg = tiny_cfg("mlp", "tracking=none", "runtime.iterations=2")
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")

    assert {s for s, (status, _) in _statuses(cfg).items() if status == "done"} == set(STAGES)
    assert all(status == "reused" for status, _ in _statuses(cfg).values())
    for module, importers in EDITS:
        with (copy / module).open("a") as fh:
            fh.write("\n# edited by a test\n")
        outcome = _statuses(cfg)
        first = min(STAGES.index(s) for s in importers)
        for stage in STAGES[:first]:
            assert outcome[stage][0] == "reused", (module, stage, outcome[stage])
        for stage in importers:
            status, reason = outcome[stage]
            assert status == "done" and "stage code changed" in reason, (module, stage, reason)
