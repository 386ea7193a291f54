"""The backend names itself, and `backend.fault.*` is applied by the backend or refused first."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict

from pipeline.config.backend_checks import check_backend_class
from pipeline.config.backend_option import resolve_backend
from pipeline.config.target_options import settle_targets
from pipeline.errors import ConfigValueError, StageFailedError
from pipeline.runner import run_pipeline
from stages.lower.stage import LoweringError
from tests.helpers.cli_runner import REPO
from tests.helpers.lowering import export_and_lower

EXAMPLE = REPO / "docs" / "examples" / "npu_backend.py"
VARIANTS = '''

class NoFaultNpu(NpuBackend):
    """Leaves backend.fault.* alone, and says so."""

    name = "npu_plain"
    applies_faults = False


class ForgetfulNpu(NpuBackend):
    """Claims to apply faults but never takes one."""

    name = "npu_forgetful"

    def fault_for(self, nodes):
        return None


class BorrowedName(NpuBackend):
    name = "xnnpack"


class Nameless(NpuBackend):
    name = "has space"
'''


def _check_class(cfg: DictConfig) -> None:
    """`backend.name` and `backend.fault.*` checked against the backend resolved once."""
    settle_targets(cfg, ["lower"], Path.cwd())
    check_backend_class(cfg, resolve_backend(cfg, ["lower"]))


@pytest.fixture
def backends(tmp_path: Path) -> Path:
    """A file of the example backend and variants of it, as an author would write them."""
    path = tmp_path / "my_backends.py"
    path.write_text(EXAMPLE.read_text() + VARIANTS)
    return path


def test_the_name_comes_from_the_class(tiny_cfg: Callable[..., DictConfig], backends: Path) -> None:
    assert tiny_cfg("mlp").backend.name == "xnnpack"
    assert tiny_cfg("mlp", "backend=qnn").backend.name == "qnn"
    custom = tiny_cfg("mlp", f"backend._target_={backends}:NpuBackend")
    assert custom.backend.name == "npu"
    _check_class(custom)


def test_another_name_is_refused(tiny_cfg: Callable[..., DictConfig], backends: Path) -> None:
    cfg = tiny_cfg("mlp", f"backend._target_={backends}:NpuBackend", "backend.name=xnnpack")
    with pytest.raises(ConfigValueError, match=r"backend.name=xnnpack: .* names itself 'npu'"):
        _check_class(cfg)
    for cls, why in [("BorrowedName", "name of the built-in backend"), ("Nameless", "class attr")]:
        borrowed = tiny_cfg("mlp", f"backend._target_={backends}:{cls}")
        assert borrowed.backend.name == "unresolved-backend"
        with pytest.raises(ConfigValueError, match=why):
            _check_class(borrowed)


def test_a_fault_is_refused_before_any_stage_by_a_backend_that_does_not_apply_it(
    tiny_cfg: Callable[..., DictConfig], backends: Path, tmp_path: Path
) -> None:
    cfg = tiny_cfg(
        "mlp",
        f"backend._target_={backends}:NoFaultNpu",
        "backend.fault.node=relu",
        "tracking.enabled=false",
    )
    with pytest.raises(
        ConfigValueError, match=r"'npu_plain' .* does not apply faults.*applies_faults"
    ):
        run_pipeline(cfg, print_summary=False)
    assert not (tmp_path / "run").exists()  # refused before any stage made the run dir
    plain = tiny_cfg("mlp", f"backend._target_={backends}:NoFaultNpu", "tracking.enabled=false")
    result = run_pipeline(plain, print_summary=False)  # without a fault it runs
    lowering = json.loads((result.run_dir / "lowering.json").read_text())
    assert lowering["backend"] == "npu_plain" and lowering["fault_injected"] is None


def test_a_fault_a_backend_claims_but_never_applies_fails_lowering_unrecorded(
    tiny_cfg: Callable[..., DictConfig], backends: Path, tmp_path: Path
) -> None:
    cfg = tiny_cfg("mlp", f"backend._target_={backends}:ForgetfulNpu", "backend.fault.node=relu")
    with pytest.raises(LoweringError, match=r"'npu_forgetful' .* never took the fault.*fault_for"):
        export_and_lower(cfg, tmp_path)
    assert not (tmp_path / "lowering.json").exists()


def test_a_fault_on_an_op_the_backend_left_out_is_applied_by_the_tool(
    tiny_cfg: Callable[..., DictConfig], backends: Path, tmp_path: Path
) -> None:
    target = f"backend._target_={backends}:ForgetfulNpu"
    _, plain = export_and_lower(tiny_cfg("three_inputs", target), tmp_path / "plain")
    left_out = json.loads(plain.lowering_report.read_text())["rejected_ops"][0]["node"]
    cfg = tiny_cfg("three_inputs", target, f"backend.fault.node={left_out}")
    _, lowered = export_and_lower(cfg, tmp_path / "faulted")
    report = json.loads(lowered.lowering_report.read_text())
    assert report["fault_injected"]["node"] == left_out
    assert lowered.metrics["fault_injected"] == 1.0


def test_a_target_that_names_nothing_stops_before_any_stage_with_the_reason(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = tiny_cfg("mlp", "backend._target_=./absent_backend.py:Npu", "tracking.enabled=false")
    assert cfg.backend.name == "unresolved-backend"  # a label for Hydra's run dir, never raised
    with pytest.raises(ConfigValueError, match=r"no such file .*absent_backend\.py"):
        run_pipeline(cfg, print_summary=False)
    assert not (tmp_path / "run").exists()


def _tags(store: Path) -> list[dict[str, str]]:
    """Each MLflow run's tags, oldest first, read from the sqlite store."""
    with sqlite3.connect(store) as db:
        runs = [r for (r,) in db.execute("SELECT run_uuid FROM runs ORDER BY start_time")]
        return [
            dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run,)).fetchall())
            for run in runs
        ]


def test_the_run_is_tagged_fault_injected_only_when_the_fault_was_applied(
    tiny_cfg: Callable[..., DictConfig], backends: Path, tmp_path: Path
) -> None:
    fault = ("backend.fault.node=relu", "backend.fault.kind=offset", "backend.fault.value=3")
    forgetful = tiny_cfg("mlp", f"backend._target_={backends}:ForgetfulNpu", *fault)
    with pytest.raises(StageFailedError, match="never took the fault"):
        run_pipeline(forgetful, print_summary=False)
    applied = tiny_cfg("mlp", f"backend._target_={backends}:NpuBackend", *fault)
    with open_dict(applied):
        applied.run_dir = str(tmp_path / "applied")
    run_pipeline(applied, print_summary=False)
    failed, faulted = _tags(tmp_path / "mlflow.db")
    assert failed["fault_requested"] == "offset on relu" and "fault_injected" not in failed
    assert faulted["fault_injected"] == "offset on relu" and faulted["backend"] == "npu"


def test_a_fault_executorch_cannot_express_is_refused_before_any_stage(
    tiny_cfg: Callable[..., DictConfig],
) -> None:
    ok = tiny_cfg("mlp", "backend=executorch_xnnpack", "backend.fault.node=relu")
    assert ok.backend.name == "executorch_xnnpack"
    _check_class(ok)  # scale: an extra op after relu in the program ExecuTorch lowers
    cfg = tiny_cfg(
        "mlp",
        "backend=executorch_xnnpack",
        "backend.fault.node=relu",
        "backend.fault.kind=transpose",
    )
    with pytest.raises(ConfigValueError, match=r"backend\.fault\.kind=transpose: .* extra op"):
        _check_class(cfg)
