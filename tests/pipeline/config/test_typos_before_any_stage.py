"""A typo never runs silently: unknown keys (with or without `+`) and a factory the user's file or
module does not define are refused by the real CLI before any stage, with the closest names, no
run directory, no MLflow run and no resume line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli_runner import run_module

MODEL_FILE = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.inp(x)


def make():
    return Net()
"""


def _refused(tmp_path: Path, *args: str) -> str:
    """Run the CLI with the default MLflow store; it must stop before any stage and leave
    nothing of a run behind. Its output."""
    proc = run_module("pipeline", *args, cwd=tmp_path, timeout=300)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1, out
    assert out.startswith("error: ") and "Traceback" not in out, out
    assert "resume" not in out.lower(), out
    runs = tmp_path / "outputs" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), out  # no run directory
    assert not (tmp_path / "outputs" / "mlflow.db").exists(), out  # no MLflow store, no run
    return out


@pytest.mark.parametrize("plus", ["", "+", "++"])
def test_a_misspelled_key_names_the_right_one_with_or_without_plus(
    tmp_path: Path, plus: str
) -> None:
    out = _refused(tmp_path, "model=mlp", f"{plus}backend.precison=int8")
    assert "there is no option backend.precison; did you mean backend.precision?" in out, out


def test_a_backends_own_compile_specs_still_take_plus(tmp_path: Path) -> None:
    proc = run_module(
        "pipeline", "model=mlp", "+backend.compile_specs.tile=4", "--cfg", "job", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "tile: 4" in proc.stdout


def test_a_missing_factory_in_the_users_file_is_refused_naming_what_it_defines(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_model.py").write_text(MODEL_FILE)
    out = _refused(
        tmp_path,
        "model=custom",
        "model._target_=./my_model.py:build",
        "model.inputs=[{shape:[1,4]}]",
    )
    assert "model._target_=./my_model.py:build" in out and "defines no 'build'" in out, out
    assert "it defines Net, make" in out, out
    # Without model.inputs the factory is still the first thing named, never `model=make`.
    out = _refused(tmp_path, "model=custom", "model._target_=./my_model.py:build")
    assert "defines no 'build'" in out and "model=build" not in out, out


def test_missing_inputs_name_the_target_the_user_typed(tmp_path: Path) -> None:
    (tmp_path / "my_model.py").write_text(MODEL_FILE)
    out = _refused(tmp_path, "model=custom", "model._target_=./my_model.py:make")
    assert "model._target_=./my_model.py:make needs model.inputs" in out, out
    assert "model=make" not in out, out


def test_a_missing_factory_in_a_module_is_refused(tmp_path: Path) -> None:
    out = _refused(
        tmp_path,
        "model=custom",
        "model._target_=stages.export.zoo.mlp.build_mlpp",
        "model.inputs=[{shape:[1,4]}]",
    )
    assert "defines no 'build_mlpp'" in out and "build_mlp" in out, out
