"""Real ExecuTorch files for tests: ETRecord, .pte, ETDump and debug buffer from its runtime.

A small model with XNNPACK partitions and operators XNNPACK leaves to the portable runtime
(layer norm), lowered with `to_edge_transform_and_lower(..., generate_etrecord=True)` and run
through the pybindings with an ETDump and a debug buffer. Needs the executorch extra.
"""

from __future__ import annotations

import fcntl
from dataclasses import dataclass
from pathlib import Path

import torch

DEBUG_BUFFER_BYTES = 1 << 20


@dataclass(frozen=True)
class ExecuTorchFiles:
    etrecord: Path
    program: Path
    etdump: Path
    debug_buffer: Path
    etrecord_without_inputs: Path


class MixedModel(torch.nn.Module):
    """Linear (XNNPACK) -> LayerNorm (portable) -> ReLU + Linear (XNNPACK) -> LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.out_norm = torch.nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm(self.fc1(x)))
        return self.out_norm(self.fc2(y) * 2.0)


def write_executorch_files(out: Path, iterations: int = 3) -> ExecuTorchFiles:
    """Lower, save the ETRecord and .pte, run `iterations` times with ETDump + debug buffer."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    files = ExecuTorchFiles(
        out / "etrecord.bin",
        out / "model.pte",
        out / "etdump.etdp",
        out / "debug_buffer.bin",
        out / "etrecord_without_inputs.bin",
    )
    out.mkdir(parents=True, exist_ok=True)
    with (out / ".lock").open("a") as lock:  # xdist workers sharing a directory: one writes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if files.debug_buffer.is_file():
            return files
        torch.manual_seed(0)
        x = torch.randn(2, 8)
        exported = torch.export.export(MixedModel().eval(), (x,))
        edge = to_edge_transform_and_lower(
            exported, partitioner=[XnnpackPartitioner()], generate_etrecord=True
        )
        program = edge.to_executorch()
        etrecord = program.get_etrecord()
        etrecord.save(str(files.etrecord_without_inputs))  # as generate_etrecord leaves it
        etrecord.update_representative_inputs([(x,)])
        etrecord.save(str(files.etrecord))
        files.program.write_bytes(program.buffer)
        module = _load_for_executorch_from_buffer(
            program.buffer, enable_etdump=True, debug_buffer_size=DEBUG_BUFFER_BYTES
        )
        for _ in range(iterations):
            module.run_method("forward", (x,))
        module.write_etdump_result_to_file(str(files.etdump), str(files.debug_buffer))
    return files
