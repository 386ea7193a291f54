"""A block of `block_patterns` tapped as `runtime.observe=tap` taps it on ExecuTorch's XNNPACK:
taps.json, the instrumented program's outputs from ExecuTorch's runtime, and the same program
run eagerly (for the tests and the benchmark that hold one against the other)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch

from tests.helpers.block_patterns import PATTERNS, with_batchnorm_statistics

SHAPE = (1, 3, 16, 16)


def tapped_block(
    name: str, precision: str, directory: Path
) -> tuple[dict[str, Any], list[Any], dict[str, torch.Tensor]]:
    """taps.json, the runtime's outputs and the eager instrumented program's values by tap."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.intermediate_output_tap import FULL_TENSOR, tap_intermediate_outputs_
    from executorch.exir import to_edge_transform_and_lower

    from stages.formats.artifacts import ArtifactName
    from stages.lower.executorch.precision import as_runtime_inputs, program_at_precision
    from stages.lower.executorch.tap import lower_tapped
    from stages.lower.unlifted_module import unlifted_module
    from stages.run.executorch.taps import _run_tapped

    model = with_batchnorm_statistics(PATTERNS[name](), SHAPE)
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1))
    program = program_at_precision(torch.export.export(model, (x,)), precision, [(x,)])
    sample = as_runtime_inputs((x,), precision)
    plain = to_edge_transform_and_lower(
        copy.deepcopy(program), partitioner=[XnnpackPartitioner()], generate_etrecord=True
    ).to_executorch()
    _, manifest_path, _ = lower_tapped(
        program,
        plain.get_etrecord(),
        plain.buffer,
        [XnnpackPartitioner()],
        [sample],
        directory,
        to_edge_transform_and_lower,
        precision,
    )
    manifest = json.loads(manifest_path.read_text())
    runtime = _run_tapped((directory / ArtifactName.TAP_PROGRAM).read_bytes(), "tapped", [(x,)])[0]
    sources = {t["source"] for t in manifest["taps"]}
    eager_program, specs = tap_intermediate_outputs_(
        copy.deepcopy(program), rules=[(lambda n: n.name in sources, FULL_TENSOR)]
    )
    flat = torch.utils._pytree.tree_flatten(unlifted_module(eager_program)(*sample))[0]
    return manifest, runtime, {s.node_name: flat[int(s.output_index)] for s in specs}
