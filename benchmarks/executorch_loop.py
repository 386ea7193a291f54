"""ExecuTorch 1.5.1's own export -> lower -> run -> inspect loop on the zoo vit, as a user runs it.

    python benchmarks/executorch_loop.py WORK_DIR      # needs the [executorch] extra

The same model and input as `python -m pipeline model=vit backend=xnnpack` (ViT-Ti/16 at 224,
seeded): torch.export, to_edge_transform_and_lower with XnnpackPartitioner and an ETRecord,
the .pte and ETRecord written, one run in ExecuTorch's runtime with ETDump and debug buffer,
then Inspector: its event table and the SNR numeric gap. Prints per-step seconds as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

STEPS: dict[str, float] = {}
_last = time.perf_counter()


def _step(name: str) -> None:
    global _last
    now = time.perf_counter()
    STEPS[name] = round(now - _last, 3)
    _last = now


def main(work: Path, dim: int = 192, heads: int = 3, debug_buffer_mb: int = 256) -> None:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools import Inspector
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from stages.export.zoo.vit import build_vit

    _step("import")
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = build_vit(
        image_size=224, patch_size=16, num_classes=1000, dim=dim, depth=12, heads=heads
    )
    x = torch.randn(1, 3, 224, 224)
    exported = torch.export.export(model.eval(), (x,))
    _step("export")
    edge = to_edge_transform_and_lower(
        exported, partitioner=[XnnpackPartitioner()], generate_etrecord=True
    )
    program = edge.to_executorch()
    (work / "program.pte").write_bytes(program.buffer)
    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs([(x,)])
    etrecord.save(str(work / "etrecord.bin"))
    _step("lower")
    module = _load_for_executorch_from_buffer(
        program.buffer, enable_etdump=True, debug_buffer_size=debug_buffer_mb * 1024 * 1024
    )
    module.run_method("forward", (x,))
    module.write_etdump_result_to_file(str(work / "etdump.etdp"), str(work / "debug.bin"))
    _step("run")
    inspector = Inspector(
        etdump_path=str(work / "etdump.etdp"),
        etrecord=str(work / "etrecord.bin"),
        debug_buffer_path=str(work / "debug.bin"),
    )
    events = inspector.to_dataframe()
    gap = inspector.calculate_numeric_gap("SNR")
    _step("inspect")
    print(json.dumps({"steps_s": STEPS, "event_rows": len(events), "gap_rows": len(gap)}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("work_dir", type=Path, help="where the .pte, ETRecord and ETDump go")
    parser.add_argument("--dim", type=int, default=192, help="ViT width (192 Ti, 384 S, 768 B)")
    parser.add_argument("--heads", type=int, default=3, help="attention heads")
    parser.add_argument("--debug-buffer-mb", type=int, default=256, help="sized up front")
    args = parser.parse_args()
    main(args.work_dir, args.dim, args.heads, args.debug_buffer_mb)
