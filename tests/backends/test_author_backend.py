"""The worked example backend (docs/examples/npu_backend.py) plugged in from a directory outside
the checkout, the three documented ways, by the installed console command; the working directory
also holds `conf/`, `pipeline/` and `stages/` folders of the user's own, which change nothing."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.helpers.cli_runner import REPO, console_script, run_console, shadowing_working_dir

EXAMPLE = REPO / "docs" / "examples" / "npu_backend.py"
FAST = ("model=mlp", "runtime.iterations=2")


@pytest.fixture
def author(tmp_path: Path) -> tuple[Path, Path]:
    """(the launcher, the author's working directory holding a copy of the example)."""
    work = shadowing_working_dir(tmp_path / "work")
    shutil.copy(EXAMPLE, work / "npu_backend.py")
    return console_script(tmp_path / "bin"), work


def _ok(result: object, expected: int = 0) -> None:
    code = getattr(result, "returncode", 1)
    assert code == expected, (
        f"exit {code}\n{getattr(result, 'stdout', '')}\n{getattr(result, 'stderr', '')}"
    )


def _npu_events(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "events.csv").open() as handle:
        return [row for row in csv.DictReader(handle) if row["delegate_backend_name"] == "npu"]


def test_dotted_target_in_a_package_runs_all_stages_named_by_its_class(
    author: tuple[Path, Path], tmp_path: Path
) -> None:
    script, work = author
    package = tmp_path / "site" / "npu_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, package / "backend.py")
    result = run_console(
        script,
        *FAST,
        "backend._target_=npu_pkg.backend.NpuBackend",
        "tracking.enabled=false",
        cwd=work,
        pythonpath=(tmp_path / "site",),
    )
    _ok(result)
    (run_dir,) = (work / "outputs" / "runs").glob("*/*-mlp-npu")  # named by the class, not xnnpack
    lowering = json.loads((run_dir / "lowering.json").read_text())
    assert lowering["backend"] == "npu" and lowering["fault_injected"] is None
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"] == "pass" and summary["backend"] == "npu"
    events = _npu_events(run_dir)
    fused = [e for e in events if e["delegate_debug_identifier"].endswith(":linear+relu")]
    assert fused and json.loads(fused[0]["op_names"]) == ["linear", "relu"]
    assert json.loads(fused[0]["delegate_debug_metadatas"])[0] == {"ops": 2, "elements": 256}


def test_file_target_applies_a_fault_and_the_verdict_names_the_fused_kernel(
    author: tuple[Path, Path],
) -> None:
    script, work = author
    result = run_console(
        script,
        *FAST,
        "backend._target_=./npu_backend.py:NpuBackend",
        "backend.fault.node=relu",
        "tracking.enabled=false",
        "hydra.run.dir=run",
        cwd=work,
    )
    _ok(result, expected=3)  # a FAIL verdict exits 3 (CI gates on it)
    lowering = json.loads((work / "run" / "lowering.json").read_text())
    assert lowering["backend_target"] == f"{work / 'npu_backend.py'}:NpuBackend"
    assert lowering["fault_injected"]["node"] == "relu"
    summary = json.loads((work / "run" / "summary.json").read_text())
    divergence = summary["first_divergence"]
    assert summary["verdict"] == "fail"
    assert divergence["op_names"] == ["linear", "relu"]
    assert divergence["delegate_debug_identifiers"] == ["npu/p0/k0:linear+relu"]


def test_own_config_option_in_a_sweep_beside_xnnpack(
    author: tuple[Path, Path], tmp_path: Path
) -> None:
    script, work = author
    option = work / "myconf" / "backend" / "npu.yaml"
    option.parent.mkdir(parents=True)
    option.write_text(
        "defaults:\n  - backend_schema\n  - _self_\n_target_: ./npu_backend.py:NpuBackend\n"
    )
    store = tmp_path / "mlflow.db"
    result = run_console(
        script,
        "-m",
        "--config-dir",
        "myconf",
        "backend=npu,xnnpack",
        *FAST,
        f"tracking.uri=sqlite:///{store}",
        "hydra.sweep.dir=sweep",
        cwd=work,
    )
    _ok(result)
    assert sorted(p.name for p in (work / "sweep").glob("*-mlp-*")) == [
        "0-mlp-npu-fp32",
        "1-mlp-xnnpack-fp32",
    ]
    for job in ("0-mlp-npu-fp32", "1-mlp-xnnpack-fp32"):
        summary = json.loads((work / "sweep" / job / "summary.json").read_text())
        assert summary["verdict"] == "pass", job
    with sqlite3.connect(store) as db:
        tags = sorted(v for (v,) in db.execute("SELECT value FROM tags WHERE key = 'backend'"))
        names = sorted(
            v for (v,) in db.execute("SELECT value FROM params WHERE key = 'backend.name'")
        )
    assert tags == ["npu", "xnnpack"] and names == ["npu", "xnnpack"]
