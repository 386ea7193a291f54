"""Where an ExecuTorch int8 tap run's lower stage spends its time (issue 44): the shipped
program's lowering against the instrumented one's, CPU seconds in one process after a warm-up.

    PYTHONPATH=. python benchmarks/bench_tap_lowering.py RUN_DIR [--repeats 2]

RUN_DIR is a finished `backend=executorch_xnnpack backend.precision=int8 runtime.observe=tap`
run (its exported.pt2, inputs.pt and taps.json). Both programs are lowered as the lower stage
lowers them (`to_edge_transform_and_lower` with XNNPACK's partitioner, then `to_executorch`),
the instrumented one tapped at the run's tap points with ExecuTorch's own tap. CPU seconds
(`time.process_time`) rather than wall: on a shared machine wall time is mostly other people's
load. The first lowering pays ExecuTorch's one-time costs (XNNPACK's pattern graphs) and is
reported apart.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

from stages.handover.exported_program import load_exported_program
from stages.handover.samples import load_samples
from stages.lower.executorch.precision import program_at_precision


def _lowered(program: Any, tapped: bool) -> Any:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.intermediate_output_tap import strip_taps_
    from executorch.exir import to_edge_transform_and_lower

    edge = to_edge_transform_and_lower(
        program, partitioner=[XnnpackPartitioner()], generate_etrecord=True
    )
    if tapped:
        strip_taps_(edge)
    return edge.to_executorch()


def _instrumented(shipped: Any, sources: set[str]) -> Any:
    from executorch.devtools.intermediate_output_tap import FULL_TENSOR, tap_intermediate_outputs_

    program, _ = tap_intermediate_outputs_(
        copy.deepcopy(shipped),
        rules=[(lambda n: n.name in sources, FULL_TENSOR)],
        error_on_empty=False,
    )
    return program


def _cpu_seconds(program: Any, tapped: bool) -> float:
    started = time.process_time()
    _lowered(program, tapped)
    return round(time.process_time() - started, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    exported = args.run_dir / "exported.pt2"
    program = load_exported_program(exported.read_bytes(), str(exported))
    samples = [tuple(s) for s in load_samples(args.run_dir / "inputs.pt")]
    started = time.process_time()
    shipped = program_at_precision(program, "int8", samples)
    taps = json.loads((args.run_dir / "taps.json").read_text())["taps"]
    sources = {str(t["source"]) for t in taps}
    result: dict[str, Any] = {
        "taps": len(sources),
        "pt2e_cpu_s": round(time.process_time() - started, 1),
        "first_lowering_cpu_s": _cpu_seconds(copy.deepcopy(shipped), tapped=False),
        "shipped_cpu_s": [],
        "instrumented_cpu_s": [],
    }
    for _ in range(args.repeats):  # interleaved, so a change of load hits both alike
        result["shipped_cpu_s"].append(_cpu_seconds(copy.deepcopy(shipped), tapped=False))
        result["instrumented_cpu_s"].append(_cpu_seconds(_instrumented(shipped, sources), True))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
