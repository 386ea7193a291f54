"""Loading the same exported program twice reads it once and hands out copies that may change
their graphs but share the weights; a copy whose weights were written to is never handed out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from stages.formats import exported_program as ep_format
from stages.formats.exported_program import exported_program_bytes, save_exported_program
from stages.handover import exported_program as ep_handover
from stages.handover.exported_program import load_exported_program, remember_exported_program
from stages.safe_io import file_digests


class _Scaled(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((3,), scale))
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.weight + self.offset


def _program(scale: float) -> torch.export.ExportedProgram:
    return torch.export.export(_Scaled(scale), (torch.ones(2, 3),))


def _scale(program: torch.export.ExportedProgram) -> float:
    """The program's output for ones (its scale)."""
    with torch.no_grad():
        return float(program.module()(torch.ones(2, 3))[0, 0])


@pytest.fixture(autouse=True)
def _nothing_kept() -> Iterator[None]:
    ep_handover._LOADED.clear()
    file_digests.forget_all()
    yield
    ep_handover._LOADED.clear()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every time the archive is parsed (torch.export.load), by what it was called."""
    found: list[str] = []
    real = ep_format.load_exported_program_bytes
    monkeypatch.setattr(
        ep_format, "load_exported_program_bytes", lambda d, w: found.append(w) or real(d, w)
    )
    return found


def test_a_second_load_is_a_copy_whose_graph_changes_stay_its_own(parses: list[str]) -> None:
    data = exported_program_bytes(_program(2.0))
    first = load_exported_program(data)
    for node in list(first.graph.nodes):  # what a lowering pass might do to its copy
        node.meta["debug_handle"] = 999
    second = load_exported_program(data)

    assert len(parses) == 1
    assert second is not first
    assert all(n.meta.get("debug_handle") != 999 for n in second.graph.nodes)
    x = torch.tensor([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]])
    with torch.no_grad():
        assert torch.equal(second.module()(x), first.module()(x))


def test_copies_share_the_weights_and_buffers_instead_of_copying_them(parses: list[str]) -> None:
    data = exported_program_bytes(_program(2.0))
    first, second = load_exported_program(data), load_exported_program(data)
    assert first.state_dict is not second.state_dict
    for name, tensor in first.state_dict.items():
        assert second.state_dict[name] is tensor
        assert second.state_dict[name].data_ptr() == tensor.data_ptr()


def test_a_weight_written_in_place_makes_the_next_load_read_the_file_again(
    parses: list[str],
) -> None:
    data = exported_program_bytes(_program(2.0))
    first = load_exported_program(data)
    with torch.no_grad():
        first.state_dict["weight"].detach().mul_(100.0)  # a careless backend
    second = load_exported_program(data)

    assert len(parses) == 2
    assert torch.equal(second.state_dict["weight"], torch.full((3,), 2.0))


def test_one_program_is_kept_and_each_load_gives_its_own(parses: list[str]) -> None:
    blobs = [exported_program_bytes(_program(s)) for s in (1.5, 2.5, 3.5)]
    for data in blobs:
        load_exported_program(data)
    assert len(ep_handover._LOADED) == ep_handover.LOADED_KEPT == 1
    outputs = {_scale(load_exported_program(d)) for d in blobs}
    assert outputs == {1.5, 2.5, 3.5}


def test_the_saved_program_is_not_read_back_by_the_next_stages(
    tmp_path: Path, parses: list[str]
) -> None:
    """The export stage keeps what it saved; lower (bytes) and analyze (a path) get copies."""
    program = _program(4.5)
    path = tmp_path / "exported.pt2"
    digest, _ = save_exported_program(program, path)
    remember_exported_program(program, digest)

    by_path = load_exported_program(path)
    by_bytes = load_exported_program(path.read_bytes(), str(path))
    assert parses == []
    assert by_path.state_dict["weight"] is program.state_dict["weight"]
    assert _scale(by_bytes) == 4.5


def test_a_file_replaced_after_it_was_kept_is_loaded_anew(
    tmp_path: Path, parses: list[str]
) -> None:
    path = tmp_path / "exported.pt2"
    save_exported_program(_program(1.0), path)
    load_exported_program(path)
    save_exported_program(_program(7.0), path)
    assert _scale(load_exported_program(path)) == 7.0
    assert len(parses) == 2
