"""Loading the same exported program twice reads it once and hands out independent copies."""

from __future__ import annotations

import torch
from torch import nn

from stages.formats import exported_program as ep_format
from stages.formats.exported_program import exported_program_bytes, load_exported_program


def _program_bytes(scale: float) -> bytes:
    class Scaled(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * scale

    return exported_program_bytes(torch.export.export(Scaled(), (torch.ones(2, 3),)))


def test_second_load_is_a_copy_that_changes_nothing_for_the_next(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    data = _program_bytes(2.0)
    loads: list[int] = []
    real = ep_format.load_exported_program_bytes
    monkeypatch.setattr(
        ep_format, "load_exported_program_bytes", lambda d, w: loads.append(1) or real(d, w)
    )
    first = load_exported_program(data)
    for node in list(first.graph.nodes):  # what a lowering pass might do to its copy
        node.meta["debug_handle"] = 999
    second = load_exported_program(data)

    assert len(loads) == 1
    assert second is not first
    assert all(n.meta.get("debug_handle") != 999 for n in second.graph.nodes)
    x = torch.tensor([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]])
    assert torch.equal(second.module()(x), first.module()(x))


def test_programs_are_kept_by_content_and_only_a_few(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    blobs = [_program_bytes(s) for s in (1.5, 2.5, 3.5)]
    for data in blobs:
        load_exported_program(data)
    assert len(ep_format._LOADED) <= ep_format.LOADED_KEPT
    outputs = {float(load_exported_program(d).module()(torch.ones(2, 3))[0, 0]) for d in blobs}
    assert outputs == {1.5, 2.5, 3.5}


def test_a_program_over_the_size_limit_is_not_kept(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    data = _program_bytes(4.5)
    monkeypatch.setattr(ep_format, "LOADED_MAX_BYTES", len(data) - 1)
    monkeypatch.setattr(ep_format, "_LOADED", ep_format.OrderedDict())
    program = load_exported_program(data)
    assert not ep_format._LOADED
    assert float(program.module()(torch.ones(2, 3))[0, 0]) == 4.5
