"""ExecuTorch's side of bench_analyze.py: its own lowering, runtime and Inspector, timed.

Needs the `[executorch]` extra (executorch 1.5.1 with torchao).
Prints one JSON line: seconds per calculate_numeric_gap call, rows, Inspector construction time.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.devtools import Inspector
from executorch.exir import to_edge_transform_and_lower
from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

from stages.export.zoo.vit import build_vit


def main(kwargs: dict[str, Any]) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench_et_gap_"))
    torch.manual_seed(0)
    model = build_vit(**kwargs).eval()
    x = torch.randn(1, 3, kwargs["image_size"], kwargs["image_size"])
    exported = torch.export.export(model, (x,))
    edge = to_edge_transform_and_lower(
        exported, partitioner=[XnnpackPartitioner()], generate_etrecord=True
    )
    program = edge.to_executorch()
    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs([(x,)])
    etrecord_path = work / "etrecord.bin"
    etrecord.save(str(etrecord_path))
    module = _load_for_executorch_from_buffer(
        program.buffer, enable_etdump=True, debug_buffer_size=256 * 1024 * 1024
    )
    module.run_method("forward", (x,))
    etdump, debug = work / "etdump.etdp", work / "debug.bin"
    module.write_etdump_result_to_file(str(etdump), str(debug))
    started = time.perf_counter()
    inspector = Inspector(
        etdump_path=str(etdump), etrecord=str(etrecord_path), debug_buffer_path=str(debug)
    )
    construct = time.perf_counter() - started
    seconds, rows = {}, 0
    for metric in ("MSE", "L1", "SNR"):
        started = time.perf_counter()
        frame = inspector.calculate_numeric_gap(metric)
        seconds[metric] = time.perf_counter() - started
        rows = len(frame)
    print(json.dumps({"inspector_init_s": construct, "gap_s": seconds, "rows": rows}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("vit_kwargs", type=json.loads, help="build_vit keyword arguments as JSON")
    main(parser.parse_args().vit_kwargs)
