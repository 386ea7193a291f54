"""`python -m pipeline.tools.pack_etrecord`: a self-contained ETRecord from a run's by-hash one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stages.handover.etrecord import load_etrecord
from tests.helpers.cli_runner import REPO
from tests.helpers.configs import TINY_MODEL_OVERRIDES, compose_config
from tests.helpers.lowering import export_and_lower


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pack")
    cfg = compose_config(root, [*TINY_MODEL_OVERRIDES["mlp"], "backend=portable"])
    export_and_lower(cfg, root / "run")
    return root / "run"


def _pack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.tools.pack_etrecord", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )


def test_packs_a_run_dir_into_one_that_stands_alone(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "shared" / "etrecord_full.zip"
    out.parent.mkdir()
    done = _pack(str(run_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "self-contained ETRecord" in done.stdout
    with zipfile.ZipFile(out) as archive:
        assert "reference_program.pt2" in archive.namelist()
    alone = load_etrecord(out)
    assert alone.program_bytes() == (run_dir / "exported.pt2").read_bytes()
    assert alone.handles == load_etrecord(run_dir / "etrecord.zip").handles


def test_a_program_not_beside_it_comes_by_program(run_dir: Path, tmp_path: Path) -> None:
    carried = Path(shutil.copy(run_dir / "etrecord.zip", tmp_path / "etrecord.zip"))
    refused = _pack(str(carried), "--out", str(tmp_path / "full.zip"))
    assert refused.returncode == 2 and "--program PATH" in refused.stderr
    assert "does not exist" in refused.stderr and not (tmp_path / "full.zip").exists()
    wrong = tmp_path / "wrong.pt2"
    wrong.write_bytes(b"PK not the program")
    refused = _pack(str(carried), "--out", str(tmp_path / "full.zip"), "--program", str(wrong))
    assert refused.returncode == 2 and "do not belong together" in refused.stderr
    given = _pack(
        str(carried),
        "--out",
        str(tmp_path / "full.zip"),
        "--program",
        str(run_dir / "exported.pt2"),
    )
    assert given.returncode == 0, given.stderr
    same = _pack(str(carried), "--out", str(carried))
    assert same.returncode == 2 and "choose another path" in same.stderr
