"""A lowered program's weights are spliced back from exported.pt2 read member by member: the
file is hashed in blocks and never held whole in memory."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import torch
from torch import nn

from stages.formats.exported_program import save_exported_program
from stages.formats.shared_weights import open_weight_file, weight_file_on_disk


class _Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(512, 512, bias=False) for _ in range(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _exported(tmp_path: Path) -> Path:
    path = tmp_path / "exported.pt2"
    save_exported_program(torch.export.export(_Stack(), (torch.ones(1, 512),)), path)
    return path


def test_same_members_and_digest_as_the_file_read_whole(tmp_path: Path) -> None:
    path = _exported(tmp_path)
    whole = open_weight_file(path)
    with weight_file_on_disk(path) as lazy:
        assert lazy.sha256 == whole.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert list(lazy.members) == list(whole.members) and len(lazy.members) == 8
        assert all(lazy.members[name] == data for name, data in whole.members.items())
        assert "no such member" not in lazy.members


def test_members_are_read_one_at_a_time(tmp_path: Path) -> None:
    path = _exported(tmp_path)
    size = path.stat().st_size  # 8 weights of 1 MiB
    tracemalloc.start()
    try:
        with weight_file_on_disk(path) as lazy:
            read = sum(len(lazy.members[name]) for name in lazy.members)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read > 0.9 * size
    assert peak < size / 3  # a member or a block of the hash, not the archive
