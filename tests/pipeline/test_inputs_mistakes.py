"""Inputs mistakes through the real CLI: an option mistake is refused before any stage (exit 1,
nothing exported); bad data stop the export stage with exit 1, naming the sample's index
and file, in a few lines and without a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.helpers.cli_runner import run_module

MAX_LINES = 4


def test_files_without_a_path_is_refused_before_any_stage(tmp_path: Path) -> None:
    proc = run_module("pipeline", "model=mlp", "inputs=files", "tracking=none", cwd=tmp_path)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1, out
    assert out.startswith("error: inputs=files needs inputs.path=FILE, DIR or 'GLOB'"), out
    assert len(out.splitlines()) <= MAX_LINES, out
    assert not list(tmp_path.rglob("exported.pt2"))


def test_a_nan_sample_is_named_with_its_index_and_file(tmp_path: Path) -> None:
    data = np.zeros((3, 4, 32), np.float32)
    data[2, 1, 5] = np.nan
    np.save(tmp_path / "d.npy", data)
    proc = run_module(
        "pipeline", "model=mlp", "inputs=files", "inputs.path=d.npy", "tracking=none", cwd=tmp_path
    )
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1, out
    assert "sample 2 (d.npy[2]): input 0 holds NaN or Inf values" in out
    assert "Traceback" not in out and len(out.splitlines()) <= MAX_LINES, out
