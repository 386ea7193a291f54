"""Write ETDumps with ExecuTorch 1.5.1's own runtime, like the shared fixtures (see their README).

Run with the side venv's interpreter (executorch + torchao):
    .ci/.executorch-venv/bin/python tests/make_executorch_etdumps.py OUT_DIR
A small ViT (dim 96, 64×64) lowered with XnnpackPartitioner, run once profiling only and once
with a debug buffer: etdump_1run.etdp, etdump_1run_debug.etdp, debug_buffer_1run.bin.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

from stages.export.zoo.vit import build_vit


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = build_vit(image_size=64, patch_size=16, dim=96, depth=2, heads=3, num_classes=10)
    x = torch.randn(1, 3, 64, 64)
    exported = torch.export.export(model.eval(), (x,))
    program = to_edge_transform_and_lower(
        exported, partitioner=[XnnpackPartitioner()]
    ).to_executorch()
    plain = _load_for_executorch_from_buffer(program.buffer, enable_etdump=True)
    plain.run_method("forward", (x,))
    plain.write_etdump_result_to_file(str(out / "etdump_1run.etdp"), None)
    debug = _load_for_executorch_from_buffer(
        program.buffer, enable_etdump=True, debug_buffer_size=64 * 1024 * 1024
    )
    debug.run_method("forward", (x,))
    debug.write_etdump_result_to_file(
        str(out / "etdump_1run_debug.etdp"), str(out / "debug_buffer_1run.bin")
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
