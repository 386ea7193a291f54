"""An ETRecord that refers to a program this process holds (the export stage's) is loaded without
reading that program again; its bytes are read, and verified, only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from stages.formats.etrecord import ReferencedProgramError
from stages.handover import exported_program as ep_handover
from stages.handover.etrecord import etrecord_program, load_etrecord
from stages.lower.stage import LowerArtifacts
from stages.safe_io.atomic_write import write_bytes_atomic
from tests.helpers.lowering import export_and_lower


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
