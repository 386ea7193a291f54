"""`backend.keep_float` in the emulated delegates: kernels of kept ops run at fp32.

A kept kernel's weights are stored unquantized and its output is not rounded; a kernel at the
delegate's precision that reads a kept kernel's output rounds that input first (its calibrated
int8 scale), as a real delegate quantizes at the boundary from a float op back to int8.
"""

from __future__ import annotations

from typing import Any

import torch

from stages.backends.backend_api import PartitionGraph
from stages.backends.kernel.plan import KernelPlan
from stages.backends.precision_emulation import int8_scale
from stages.closed_sets import Precision


def _kept(plan: KernelPlan, partition: PartitionGraph) -> bool:
    return any(n.name in partition.keep_float for n in plan.nodes)


def with_keep_float(
    entry: dict[str, Any],
    plan: KernelPlan,
    partition: PartitionGraph,
    ids: dict[torch.fx.Node, int],
) -> dict[str, Any]:
    """The kernel entry at fp32 when it holds a kept op; else the inputs it must round because
    a kept kernel produced them (value id → int8 scale, or None for fp16)."""
    if not partition.keep_float:
        return entry
    if _kept(plan, partition):
        return {**entry, "precision": Precision.fp32.value, "out_scale": None}
    members = set(plan.nodes)
    rounded: dict[str, float | None] = {}
    for node in plan.nodes:
        for arg in node.all_input_nodes:
            if arg not in members and arg.name in partition.keep_float and arg in ids:
                rounded[str(ids[arg])] = int8_scale(partition.calibration.get(arg.name))
    return {**entry, "round_inputs": rounded} if rounded else entry


def kept_float_inputs(partition: PartitionGraph) -> list[bool]:
    """Per partition input: True when only kept ops read it (it enters unrounded)."""
    members = set(partition.nodes)
    flags = []
    for node in partition.inputs:
        readers = [n for n in node.users if n in members]
        flags.append(bool(readers) and all(n.name in partition.keep_float for n in readers))
    return flags
