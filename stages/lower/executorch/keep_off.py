"""`backend.keep_off` for ExecuTorch's XNNPACK partitioner, through its own configuration hooks
(and `keep_float_filter`, the quantizer hook `backend.keep_float` will use).

XNNPACK's partitioner (an ExecuTorch `ConfigerationBasedPartitioner`) decides twice which ops
it takes: `ops_to_not_decompose` (ops kept whole for it) and `get_matched_nodes_from_configs`
(the node groups it partitions; grouping keeps partitions convex). This wrapper answers "no"
in both for the kept-off ops, found by their provenance (`node.meta["from_node"]`, which names
the exported program's node each edge node came from), so they decompose and run on the
portable kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def source_names(node: torch.fx.Node) -> set[str]:
    """The names of the nodes `node` came from, through every pass (its provenance chain)."""
    names: set[str] = set()
    pending = list(node.meta.get("from_node") or [])
    while pending:
        source = pending.pop()
        name = getattr(source, "name", None)
        if isinstance(name, str):
            names.add(name)
        pending.extend(getattr(source, "from_node", None) or [])
    return names


def _partitioner_base() -> type:
    from executorch.exir.backend.partitioner import Partitioner

    return Partitioner


def keep_off_partitioner(inner: Any, keep_off: frozenset[str]) -> Any:
    """`inner` (an XNNPACK partitioner) with the `keep_off` ops left out of its partitions."""

    def kept_off(node: torch.fx.Node) -> bool:
        return node.op == "call_function" and bool(source_names(node) & keep_off)

    class KeepOffPartitioner(_partitioner_base()):  # type: ignore[misc]
        """Delegates to `inner`, minus the kept-off ops."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def ops_to_not_decompose(self, ep: Any) -> tuple[list[Any], Callable[..., bool] | None]:
            ops, check = inner.ops_to_not_decompose(ep)

            def keep_whole(node: torch.fx.Node) -> bool:
                return not kept_off(node) and (check(node) if check is not None else True)

            return ops, keep_whole

        def partition(self, ep: Any) -> Any:
            matched = inner.get_matched_nodes_from_configs

            def without_kept_off(program: Any) -> list[list[torch.fx.Node]]:
                groups = [[n for n in g if not kept_off(n)] for g in matched(program)]
                return [g for g in groups if any(n.op == "call_function" for n in g)]

            inner.get_matched_nodes_from_configs = without_kept_off
            try:
                return inner.partition(ep)
            finally:
                del inner.get_matched_nodes_from_configs

    return KeepOffPartitioner()


def keep_float_filter(keep_float: frozenset[str]) -> Callable[[torch.fx.Node], bool]:
    """For `XNNPACKQuantizer.set_filter_function`: quantize every node but the kept-float ops
    (by name or provenance): how `backend.keep_float` reaches the int8 quantizer."""

    def quantize(node: torch.fx.Node) -> bool:
        return node.name not in keep_float and not (source_names(node) & keep_float)

    return quantize
