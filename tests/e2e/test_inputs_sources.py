"""The user's data through the real CLI: inputs=files and inputs=loader split calibration from
evaluation (calibration_inputs.pt, labels.pt, summary.json's `inputs`, the terminal line), a
changed data file invalidates the cached export, and inputs=random says it calibrated on its
evaluation samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from stages.formats.artifacts import ArtifactName
from tests.helpers.cli_runner import run_module

MLP_INT8 = ["model=mlp", "backend=xnnpack", "backend.precision=int8", "tracking=none"]
LOADER = """
import torch

def batches(count=60):
    generator = torch.Generator().manual_seed(3)
    for index in range(count):
        yield (torch.randn(4, 32, generator=generator),), torch.full((4,), index % 10)
"""


def _run(tmp_path: Path, run_dir: Path, *args: str) -> str:
    proc = run_module(
        "pipeline",
        *MLP_INT8,
        *args,
        f"hydra.run.dir={run_dir}",
        f"cache_dir={tmp_path / 'cache'}",
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def _record(run_dir: Path) -> dict:
    return json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())["inputs"]


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_files_split_and_a_changed_file_reexports(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    np.savez(
        data / "a.npz",
        x=rng.standard_normal((20, 4, 32)).astype(np.float32),
        labels=rng.integers(0, 10, (20, 4)),
    )
    np.savez(
        data / "b.npz",
        x=rng.standard_normal((20, 4, 32)).astype(np.float32),
        labels=rng.integers(0, 10, (20, 4)),
    )
    out = _run(
        tmp_path,
        tmp_path / "first",
        "inputs=files",
        "inputs.path=data",
        "inputs.calibration=30",
        "inputs.evaluation=6",
    )
    assert (
        "inputs: 6 evaluation sample(s) from files (inputs.path=data); int8 calibrated on 30 others [0, 30)"
        in out
    )
    first = tmp_path / "first"
    record = _record(first)
    assert record["evaluation"]["indices"] == [30, 36] and record["overlap"] is False
    assert record["evaluation"]["first"].endswith("b.npz[10]") and record["labels"] is True
    assert (first / ArtifactName.CALIBRATION_INPUTS).is_file()
    labels = torch.load(first / ArtifactName.LABELS, weights_only=True)
    assert len(labels) == 6 and labels[0][0].shape == (4,)

    np.savez(
        data / "b.npz",
        x=rng.standard_normal((20, 4, 32)).astype(np.float32),
        labels=rng.integers(0, 10, (20, 4)),
    )
    before = torch.load(first / ArtifactName.INPUTS, weights_only=True)
    out = _run(
        tmp_path,
        first,  # the same run dir: the runner says what changed since its last export
        "inputs=files",
        "inputs.path=data",
        "inputs.calibration=30",
        "inputs.evaluation=6",
    )
    assert "[export] done" in out and "input files changed (b.npz)" in out
    after = torch.load(first / ArtifactName.INPUTS, weights_only=True)
    assert not torch.equal(before[0][0], after[0][0])


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_loader_splits_by_default_and_random_says_it_calibrated_on_its_samples(
    tmp_path: Path,
) -> None:
    (tmp_path / "data.py").write_text(LOADER)
    loaded = tmp_path / "loaded"
    out = _run(tmp_path, loaded, "inputs=loader", "inputs._target_=./data.py:batches")
    assert "int8 calibrated on 32 others [0, 32)" in out
    record = _record(loaded)
    assert record["source"] == "loader" and record["evaluation"]["indices"] == [32, 48]
    assert len(torch.load(loaded / ArtifactName.LABELS, weights_only=True)) == 16

    seeded = tmp_path / "seeded"
    out = _run(tmp_path, seeded, "stages=[export,lower,run,analyze]")
    assert "int8 calibrated on these same evaluation samples" in out
    assert _record(seeded)["calibrated_on_evaluation"] is True
    assert not (seeded / ArtifactName.CALIBRATION_INPUTS).exists()


SKEWED = """
import torch

def samples(count=48):
    generator = torch.Generator().manual_seed(7)
    for index in range(count):
        x = torch.randn(4, 32, generator=generator)
        yield (x * 0.25 if index < 32 else x,)  # calibration samples a quarter of the size
"""


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_a_narrow_calibration_misses_the_budget_without_failing_the_backend(
    tmp_path: Path,
) -> None:
    """Evaluation values past the calibrated ranges are clipped: the expected error at each op
    follows the calibration samples, so the verdict passes (the backend computes what int8 with
    this calibration should) and the accuracy budget is what misses."""
    (tmp_path / "skewed.py").write_text(SKEWED)
    proc = run_module(
        "pipeline",
        *MLP_INT8,
        "inputs=loader",
        "inputs._target_=./skewed.py:samples",
        f"hydra.run.dir={tmp_path / 'run'}",
        "cache=false",
        cwd=tmp_path,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out
    assert "== analysis: verdict PASS" in out and "accuracy: budget MISSED" in out


FROM_DISK = """
import numpy as np

def from_disk(path="rows.npy"):
    for row in np.load(path):
        yield (row.reshape(4, 32),)
"""


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_a_loader_whose_data_changed_reexports(tmp_path: Path) -> None:
    """The loader's source is unchanged, the file it reads is not: the cached export is not
    reused with the old samples."""
    (tmp_path / "disk.py").write_text(FROM_DISK)
    rows = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
    np.save(tmp_path / "rows.npy", rows)
    run_dir = tmp_path / "run"
    args = ("stages=[export]", "inputs=loader", "inputs._target_=./disk.py:from_disk")
    args += ("inputs.calibration=2", "inputs.evaluation=2")
    _run(tmp_path, run_dir, *args)
    before = torch.load(run_dir / ArtifactName.INPUTS, weights_only=True)
    assert "[export] reused" in _run(tmp_path, run_dir, *args)  # nothing changed
    np.save(tmp_path / "rows.npy", rows * 2)
    out = _run(tmp_path, run_dir, *args)
    assert "[export] done" in out and "input files changed (samples of inputs._target_)" in out
    after = torch.load(run_dir / ArtifactName.INPUTS, weights_only=True)
    assert torch.equal(after[0][0], before[0][0] * 2)
