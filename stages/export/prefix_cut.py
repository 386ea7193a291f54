"""Cut a prefix of a segment of ops (a partition's, or a whole program's) into a program of its own,
for bisection (runtime.observe=bisect).

The prefix is the segment's first k+1 ops in graph order (and the getitems reading them). Every
prefix value that a later op or the program's output reads becomes an output, so a divergence
anywhere in the prefix shows at the cut. Values the prefix reads from outside become inputs,
taken from the reference's captured values on every representative sample; weights stay
weights. Written as the export stage writes its files, so the lower and run stages take it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.export import ExportedProgram

from stages.export.subgraph_cut import (
    SubgraphCutError,
    _constants,
    _samples,
    cut_graph_module,
    export_cut,
)
from stages.formats.samples import Samples


@dataclass(frozen=True)
class PrefixProgram:
    """The written prefix program: its directory, per original op name its name in the cut, and
    the original names of the values it outputs (in output order)."""

    directory: Path
    names: dict[str, str]
    outputs: tuple[str, ...]


def _prefix_nodes(segment: Sequence[torch.fx.Node], k: int) -> list[torch.fx.Node]:
    """The segment's first k+1 ops and the getitems that read them, in graph order."""
    chosen = set(segment[: k + 1])
    getitems = {user for node in chosen for user in node.users if user.target is operator.getitem}
    order = {n: i for i, n in enumerate(segment[0].graph.nodes)}
    return sorted(chosen | getitems, key=order.__getitem__)


def _frontier(prefix: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """Prefix values read after the cut (by a later op or the program's output)."""
    members = set(prefix)
    found = []
    for node in prefix:
        if any(u.target is operator.getitem for u in node.users):
            continue  # its getitems are the values read
        if any(user not in members for user in node.users) or not node.users:
            found.append(node)
    return found


def write_prefix(
    program: ExportedProgram,
    samples: Samples,
    segment: Sequence[torch.fx.Node],
    k: int,
    directory: Path,
) -> PrefixProgram:
    """Write exported.pt2, inputs.pt and reference_outputs.pt of the segment's ops 0..k."""
    if not 0 <= k < len(segment):
        raise SubgraphCutError(f"cut after op {k} is outside the segment's {len(segment)} ops")
    prefix = _prefix_nodes(segment, k)
    outputs = _frontier(prefix)
    module, inputs = cut_graph_module(prefix, _constants(program), outputs)
    cut_samples: Samples = _samples(program, samples, inputs) if inputs else [() for _ in samples]
    # A captured value may be a view (a transpose's); runtimes take contiguous inputs.
    cut_samples = [tuple(t.contiguous() for t in sample) for sample in cut_samples]
    names = export_cut(module, cut_samples, prefix, directory, "bisect_prefix")
    return PrefixProgram(directory, names, tuple(n.name for n in outputs))
