"""save_exported_program streams the archive to disk: a file torch.export.load reads, its digest
taken on the way, never the whole archive in memory, nothing half-written."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest
import torch
from torch import nn

from stages.export.debug_handle_pass import assign_debug_handles
from stages.formats.exported_program import save_exported_program
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handles.graph_handles import iter_operator_nodes
from stages.handover.exported_program import load_exported_program


class _Stack(nn.Module):
    """`layers` linears of width `width` (4 * width**2 bytes of weights each)."""

    def __init__(self, layers: int, width: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def _program(layers: int, width: int) -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    program = torch.export.export(_Stack(layers, width), (torch.ones(1, width),))
    assign_debug_handles(program)
    return program


def test_saved_file_loads_with_handles_and_the_returned_digest(tmp_path: Path) -> None:
    program = _program(3, 16)
    path = tmp_path / "exported.pt2"
    digest, size = save_exported_program(program, path)

    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert size == path.stat().st_size
    x = torch.randn(1, 16)
    assert torch.equal(torch.export.load(path).module()(x), program.module()(x))
    loaded = load_exported_program(path)
    handles = [n.meta[DEBUG_HANDLE_META] for n in iter_operator_nodes(loaded.graph_module)]
    assert handles == [n.meta[DEBUG_HANDLE_META] for n in iter_operator_nodes(program.graph_module)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported.pt2"]


def test_archive_is_never_held_in_memory(tmp_path: Path) -> None:
    program = _program(16, 256)  # 16 weights of 256 KiB: 4 MiB in all
    tracemalloc.start()
    try:
        save_exported_program(program, tmp_path / "exported.pt2")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    weights = 16 * 256 * 256 * 4
    assert (tmp_path / "exported.pt2").stat().st_size > weights
    assert peak < weights / 2  # one weight at a time passes through Python, not the archive


def test_a_failed_save_leaves_the_previous_file(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "exported.pt2"
    save_exported_program(_program(1, 8), path)
    before = path.read_bytes()

    def half_then_fail(program: object, f: object) -> None:
        f.write(b"PK\3\4 half an archive")  # type: ignore[attr-defined]
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch.export, "save", half_then_fail)
    with pytest.raises(RuntimeError, match="disk full"):
        save_exported_program(_program(1, 8), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported.pt2"]
