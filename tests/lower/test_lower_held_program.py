"""When export and lower run in one process, lower never reads exported.pt2 whole: the program
is the one held in memory and the weights are matched one member at a time from the file. What
it writes is the same as when it reads the file."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from stages.handover import exported_program as exported_program_format
from stages.lower import stage as lower_stage
from stages.safe_io import file_digests
from tests.helpers.lowering import export, lower


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


# fp32 kernels repeat the weights (stored by reference); qnn's fp16 ones are converted copies.
@pytest.mark.parametrize(("backend", "shares_weights"), [("xnnpack", True), ("qnn", False)])
def test_a_held_program_is_lowered_without_reading_its_file_whole(
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    shares_weights: bool,
) -> None:
    cfg = tiny_cfg("vit", "model.kwargs.dim=64", f"backend={backend}")
    run_dir = tmp_path / "run"
    exported = export(cfg, run_dir)

    def no_whole_read(path: Path) -> tuple[bytes, str]:
        raise AssertionError(f"lower read {path} whole although the program is held")

    with monkeypatch.context() as patch:
        patch.setattr(lower_stage, "read_with_sha256", no_whole_read)
        held = lower(cfg, exported, run_dir)
        held_program, held_etrecord = _members(held.program), _members(held.etrecord)

    # The same lowering in a process that holds nothing: the file is read and hashed.
    exported_program_format._LOADED.clear()
    file_digests.forget_all()
    read = lower(cfg, exported, run_dir)
    assert _members(read.program) == held_program
    assert _members(read.etrecord) == held_etrecord
    assert read.program.read_bytes() == held.program.read_bytes()  # no write time inside
    with zipfile.ZipFile(read.program) as archive:
        shared = "external_weights.json" in archive.namelist()
        assert shared == shares_weights
        if shared:
            assert json.loads(archive.read("external_weights.json"))["members"]
