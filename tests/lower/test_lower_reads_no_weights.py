"""Export and lower in one process: lower reads no weight bytes of exported.pt2 (the held program's
tensors are those bytes) and writes exactly what reading the members from the file writes; a
held weight written in place, or a file changed after export, makes it read the file instead."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import DictConfig

from stages.export.stage import ExportArtifacts
from stages.formats import shared_weights
from stages.formats.exported_program import save_exported_program
from stages.handover import exported_program as exported_program_format
from stages.handover.lowered_program import forget_saved, load_program
from stages.lower import stage as lower_stage
from stages.lower.stage import LowerArtifacts
from tests.helpers.lowering import export, lower

_OnDisk = shared_weights._MembersOnDisk


def _files(lowered: LowerArtifacts) -> tuple[bytes, bytes]:
    """The lowered program's bytes and its external_weights.json."""
    with zipfile.ZipFile(lowered.program) as archive:
        manifest = archive.read(shared_weights.EXTERNAL_MEMBER)
    return lowered.program.read_bytes(), manifest


def _lowered_reading_members(cfg: DictConfig, exported: ExportArtifacts, run_dir: Path) -> bytes:
    """Today's path: the members read from exported.pt2 one at a time (nothing served)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lower_stage, "held_weight_file", lambda path, sha256: None)
        return lower(cfg, exported, run_dir).program.read_bytes()


def _count_member_reads(patch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    original = _OnDisk.__getitem__

    def counted(self: shared_weights._MembersOnDisk, name: str) -> bytes:
        reads.append(name)
        return original(self, name)

    patch.setattr(_OnDisk, "__getitem__", counted)
    return reads


@pytest.fixture
def cfg(tiny_cfg: Callable[..., DictConfig]) -> DictConfig:
    return tiny_cfg("vit", "model.kwargs.dim=64", "backend=xnnpack")


def test_lower_reads_no_weight_bytes_of_the_program_it_holds(
    cfg: DictConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    exported = export(cfg, run_dir)

    def no_read(self: shared_weights._MembersOnDisk, name: str) -> bytes:
        raise AssertionError(f"lower read weight member {name} of exported.pt2")

    with monkeypatch.context() as patch:
        patch.setattr(_OnDisk, "__getitem__", no_read)
        patch.setattr(shared_weights.BoundedZip, "sha256", no_read)  # nor hashes it
        served = lower(cfg, exported, run_dir)
        program, manifest = _files(served)
    assert json.loads(manifest)["members"]  # weights were matched and stored by reference

    assert _lowered_reading_members(cfg, exported, run_dir) == program  # byte for byte

    # The run stage loads it from disk, the references checked against exported.pt2.
    forget_saved()
    from_disk = load_program(served.program)
    with pytest.MonkeyPatch.context() as patch:
        reads = _count_member_reads(patch)
        forget_saved()
        assert load_program(served.program).delegate_blobs == from_disk.delegate_blobs
    assert reads  # loading splices the weights back from the file


def test_a_held_weight_written_in_place_is_read_from_the_file(
    cfg: DictConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    exported = export(cfg, run_dir)
    expected = _lowered_reading_members(cfg, exported, run_dir)
    partition = lower_stage._partition

    def partition_then_write(*args: Any, **kwargs: Any) -> Any:
        """Lowering writes into a held weight (same values, its version counter bumped)."""
        parts = partition(*args, **kwargs)
        kept = next(iter(exported_program_format._LOADED.values())).program
        weight = next(t for t in kept.state_dict.values() if t.numel() * t.element_size() >= 4096)
        with torch.no_grad():
            weight.add_(0.0)
        return parts

    with monkeypatch.context() as patch:
        patch.setattr(lower_stage, "_partition", partition_then_write)
        reads = _count_member_reads(patch)
        program, _ = _files(lower(cfg, exported, run_dir))
    assert reads  # the members came from the file
    assert program == expected


def test_a_file_changed_after_export_is_read(
    cfg: DictConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    exported = export(cfg, run_dir)
    (old_digest,) = exported_program_format._LOADED  # the exported program stays held
    changed = exported_program_format.load_exported_program(exported.exported_program)
    for name, tensor in list(changed.state_dict.items()):  # new tensors: the held ones unchanged
        if tensor.is_floating_point():
            changed.state_dict[name] = torch.nn.Parameter(
                tensor.detach() + 1.0, tensor.requires_grad
            )
    digest, _ = save_exported_program(changed, exported.exported_program)
    assert digest != old_digest and exported_program_format.holds_exported_program(old_digest)

    with monkeypatch.context() as patch:
        reads = _count_member_reads(patch)
        lowered = lower(cfg, exported, run_dir)
    manifest = json.loads(_files(lowered)[1])
    assert manifest["sha256"] == digest  # pinned to the file as it is now, its bytes matched
    assert not reads  # the changed file was read whole (not held), its members from those bytes
    forget_saved()
    assert load_program(lowered.program).delegate_blobs  # the references agree with the file
