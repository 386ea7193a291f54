"""Which ops of the exported program each ExecuTorch delegate took, by name (lowering.json's
`partitions[].ops`, as on the emulated backends): the searches read them to know what to try."""

from __future__ import annotations

from typing import Any

from stages.lower.executorch.keep_off import source_names


def delegated_ops_by_partition(edge_program: Any, known: list[str]) -> list[list[str]]:
    """Per delegate call in graph order, the `known` op names its subgraph came from (by the
    provenance ExecuTorch keeps in `node.meta["from_node"]`), in `known`'s order."""
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    order = {name: index for index, name in enumerate(known)}
    found: list[list[str]] = []
    for _, lowered, _ in get_lowered_submodules(edge_program.graph_module):
        names: set[str] = set()
        for node in lowered.original_module.graph.nodes:
            if node.op == "call_function":
                names |= source_names(node) | {node.name}
        found.append(sorted(names & order.keys(), key=order.__getitem__))
    return found
