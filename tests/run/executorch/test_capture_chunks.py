"""Many samples captured on ExecuTorch: the debug buffer is sized from what the first sample
logged and the rest run in chunks (ExecuTorch aborts the process when its buffer fills), and the
joined payload holds every sample's values where its records say."""

from __future__ import annotations

import pytest
import torch

from stages.formats.etdump import tensor_from_buffer
from stages.run.iteration_budget import IterationBudget

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(600)]


def _program() -> bytes:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    exported = torch.export.export(model.eval(), (torch.randn(2, 16),))
    lowered = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    return lowered.to_executorch().buffer


def _logged(program: bytes, samples: list[tuple[torch.Tensor, ...]]) -> list[list[torch.Tensor]]:
    from stages.run.executorch.runtime import run_program

    budget = IterationBudget(iterations=1, min_iterations=1, max_time_s=None)
    run = run_program(program, "tiny.pte", samples, 0, budget, capture=True)
    payload = bytes(run.debug_buffer._data)
    per_sample: list[list[torch.Tensor]] = [[] for _ in samples]
    for block in run.etdump.run_data:
        for event in block.events:
            de = event.debug_event
            if de is not None and de.debug_entry is not None and de.debug_entry.tensor:
                value = tensor_from_buffer(payload, de.debug_entry.tensor)
                per_sample[block.bundled_input_index].append(value.clone())
    return per_sample


def test_chunked_captures_log_every_sample_as_one_buffer_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import stages.run.executorch.runtime as runtime

    program = _program()
    samples: list[tuple[torch.Tensor, ...]] = [(torch.randn(2, 16),) for _ in range(7)]
    whole = _logged(program, samples)
    monkeypatch.setattr(runtime, "CAPTURE_CHUNK_BYTES", 1)  # one sample per debug buffer
    chunked = _logged(program, samples)
    assert all(len(values) >= 1 for values in whole)  # every sample logged its outputs
    for one, other in zip(whole, chunked, strict=True):
        assert len(one) == len(other)
        assert all(torch.equal(a, b) for a, b in zip(one, other, strict=True))
    assert not torch.equal(chunked[0][-1], chunked[1][-1])  # each sample's own values
