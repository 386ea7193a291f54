"""A run dir written before the lowered program was renamed from `program.pte` fails clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import open_dict

from pipeline.errors import StageSelectionError
from pipeline.runner import run_pipeline
from stages.formats.artifacts import ArtifactName


def test_old_program_pte_is_named_with_what_to_do(tiny_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "old_run"
    cfg = tiny_cfg("mlp", "stages=[export,lower]", "tracking=none", "cache=false")
    with open_dict(cfg):
        cfg.run_dir = str(run_dir)
    run_pipeline(cfg, print_summary=False)
    assert ArtifactName.PROGRAM == "lowered_program.zip"
    (run_dir / ArtifactName.PROGRAM).rename(run_dir / "program.pte")  # as an old version wrote
    with open_dict(cfg):
        cfg.stages = ["run"]
    with pytest.raises(
        StageSelectionError,
        match=r"program\.pte is the same artifact under the name earlier versions used; re-run the lower stage",
    ):
        run_pipeline(cfg, print_summary=False)
