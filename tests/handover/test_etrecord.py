"""The ETRecord this process saved comes back from memory while it and its program are unchanged;
one that refers to a program this process holds (the export stage's) is loaded without reading
that program again, its bytes read, and verified, only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from stages.formats import etrecord as etrecord_module
from stages.formats.etrecord import ETRecordError, ReferencedProgramError
from stages.handover import exported_program as ep_handover
from stages.handover.etrecord import etrecord_program, load_etrecord, save_etrecord
from stages.lower.stage import LowerArtifacts
from stages.safe_io.atomic_write import write_bytes_atomic
from tests.helpers.lowering import export_and_lower
from tests.helpers.tiny_etrecord import write_tiny_etrecord


@pytest.fixture
def lowered(tiny_cfg: Callable[..., DictConfig], tmp_path: Path) -> LowerArtifacts:
    ep_handover._LOADED.clear()
    _, artifacts = export_and_lower(tiny_cfg("mlp", "backend=xnnpack"), tmp_path / "run")
    return artifacts


def test_the_held_program_is_not_read_and_its_bytes_come_when_asked(
    lowered: LowerArtifacts,
) -> None:
    exported = lowered.etrecord.parent / "exported.pt2"
    record = load_etrecord(lowered.etrecord)
    assert record.reference_program_bytes is None

    (kept,) = ep_handover._LOADED.values()
    program = etrecord_program(record)
    for name, tensor in program.state_dict.items():
        assert tensor is kept.program.state_dict[name]  # the held weights, not a new load
    assert record.program_bytes() == exported.read_bytes()


def test_a_program_replaced_after_loading_is_refused_when_its_bytes_are_asked_for(
    lowered: LowerArtifacts,
) -> None:
    exported = lowered.etrecord.parent / "exported.pt2"
    record = load_etrecord(lowered.etrecord)
    data = exported.read_bytes()
    write_bytes_atomic(exported, data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ReferencedProgramError, match="changed after the ETRecord was read"):
        record.program_bytes()


def test_a_program_this_process_does_not_hold_is_read_and_checked_at_load(
    lowered: LowerArtifacts,
) -> None:
    ep_handover._LOADED.clear()
    record = load_etrecord(lowered.etrecord)
    assert record.reference_program_bytes == (lowered.etrecord.parent / "exported.pt2").read_bytes()


@pytest.fixture
def etrecord_path(tmp_path: Path) -> Path:
    return write_tiny_etrecord(tmp_path / "etrecord.zip")


def test_the_etrecord_just_saved_is_taken_from_memory_while_it_and_its_program_are_unchanged(
    etrecord_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analysis of the process that saved an ETRecord gets a copy of it instead of reading
    the file; a changed file, or a program file gone, is read (and refused) as from disk."""
    record = load_etrecord(etrecord_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    program = run_dir / "exported.pt2"
    write_bytes_atomic(program, record.program_bytes())  # hashed as written, like export's
    record.program_file, record.program_source = "exported.pt2", program
    save_etrecord(record, run_dir / "etrecord.zip")
    with monkeypatch.context() as patch:
        patch.setattr(etrecord_module, "BoundedZip", _refuse_reading)
        taken = load_etrecord(run_dir / "etrecord.zip")
        taken.handles.clear()  # a copy: the next reader still gets the handles
        assert load_etrecord(run_dir / "etrecord.zip").handles == record.handles
    assert taken.program_fingerprint == record.program_fingerprint
    program.rename(run_dir / "renamed.pt2")
    with pytest.raises(ETRecordError, match="does not exist"):
        load_etrecord(run_dir / "etrecord.zip")


def _refuse_reading(path: Path, where: str) -> None:
    raise AssertionError(f"{where} was read from disk")
