"""Write an ETRecord with ExecuTorch 1.5.1's own writer (for tests that read ExecuTorch's format).

Run with an interpreter that has the executorch extra:
    python tests/make_executorch_etrecord.py OUT_DIR
A small MLP lowered with XnnpackPartitioner and `generate_etrecord=True`; the program's ETRecord
(exported + edge programs, debug-handle and delegate maps) saved as etrecord.bin.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower


class _SmallMlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))).softmax(dim=-1)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    exported = torch.export.export(_SmallMlp().eval(), (torch.randn(2, 8),))
    lowered = to_edge_transform_and_lower(
        exported, partitioner=[XnnpackPartitioner()], generate_etrecord=True
    )
    program = lowered.to_executorch()
    etrecord = program.get_etrecord()
    tmp = out / ".etrecord.bin.tmp"
    etrecord.save(str(tmp))
    tmp.replace(out / "etrecord.bin")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
