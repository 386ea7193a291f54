"""held_weight_file: exported.pt2's weight members served from the program this process holds
equal the file's member bytes exactly, and anything that is not provably the same gives None."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from stages.formats.exported_program import save_exported_program
from stages.formats.shared_weights import MIN_SHARED_BYTES, weight_file_on_disk
from stages.handover import exported_program as exported_program_format
from stages.handover.exported_program import remember_exported_program
from stages.handover.held_weights import held_weight_file
from stages.safe_io import file_digests


class _Model(torch.nn.Module):
    """Weights, a buffer, a tensor constant and a tied weight, most of them large enough to share."""

    def __init__(self, transposed: bool = False) -> None:
        super().__init__()
        self.first = torch.nn.Linear(64, 64)
        self.second = torch.nn.Linear(64, 64)
        self.second.weight = self.first.weight  # tied: one storage, one member
        if transposed:  # a parameter that is a view: its storage is laid out differently
            self.first.weight = torch.nn.Parameter(torch.randn(64, 64).t())
        self.register_buffer("scale", torch.rand(2000))
        self.table = torch.randn(3000)  # a tensor constant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x)) * self.scale[:64] + self.table[:64]


def _saved(path: Path, model: torch.nn.Module) -> tuple[torch.export.ExportedProgram, str]:
    """Export, save (its digest recorded, as the export stage does) and hold the program."""
    program = torch.export.export(model.eval(), (torch.randn(2, 64),))
    digest, _ = save_exported_program(program, path)
    remember_exported_program(program, digest)
    return program, digest


@pytest.fixture(autouse=True)
def _nothing_held() -> Iterator[None]:
    exported_program_format._LOADED.clear()
    yield
    exported_program_format._LOADED.clear()


def test_members_served_from_memory_are_the_files_members(tmp_path: Path) -> None:
    path = tmp_path / "exported.pt2"
    _, digest = _saved(path, _Model())
    served = held_weight_file(path, digest)
    assert served is not None
    with weight_file_on_disk(path) as on_disk:
        assert list(served.members) == list(on_disk.members)  # same members, same order
        assert served.sizes == on_disk.sizes
        assert served.sha256 == on_disk.sha256 == digest
        assert served.name == on_disk.name
        assert len(served.members) == 3  # the tied weight, the buffer, the constant
        for name in on_disk.members:
            view = served.members[name]
            assert isinstance(view, memoryview) and view.readonly
            assert bytes(view) == on_disk.members[name]
            assert len(view) >= MIN_SHARED_BYTES


def test_a_weight_written_in_place_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "exported.pt2"
    program, digest = _saved(path, _Model())
    with torch.no_grad():
        program.state_dict["scale"].add_(1.0)  # the held bytes are no longer the file's
    assert held_weight_file(path, digest) is None


def test_a_file_changed_after_saving_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "exported.pt2"
    program, digest = _saved(path, _Model())
    save_exported_program(torch.export.export(_Model().eval(), (torch.randn(2, 64),)), path)
    remember_exported_program(program, digest)  # still held under the old file's digest
    assert held_weight_file(path, digest) is None


def test_a_file_whose_digest_this_process_does_not_know_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "exported.pt2"
    _, digest = _saved(path, _Model())
    file_digests.forget_all()  # e.g. written by another process
    assert held_weight_file(path, digest) is None


def test_another_program_held_under_the_digest_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "exported.pt2"
    _, digest = _saved(path, _Model())
    other = torch.export.export(torch.nn.Linear(64, 64).eval(), (torch.randn(2, 64),))
    remember_exported_program(other, digest)  # its tensors are not the file's
    assert held_weight_file(path, digest) is None


def test_nothing_held_gives_none(tmp_path: Path) -> None:
    path = tmp_path / "exported.pt2"
    _, digest = _saved(path, _Model())
    exported_program_format._LOADED.clear()
    assert held_weight_file(path, digest) is None


# torch.export.save warns that the view covers no whole storage: the case under test.
@pytest.mark.filterwarnings("ignore:No complete tensor found:UserWarning")
def test_a_view_parameter_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "exported.pt2"
    program, digest = _saved(path, _Model(transposed=True))
    assert not program.state_dict["first.weight"].is_contiguous()
    assert held_weight_file(path, digest) is None
