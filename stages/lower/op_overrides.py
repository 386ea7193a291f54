"""`backend.keep_float` and `backend.keep_off`: op names resolved to nodes of the exported program.

Ops are named as `backend.fault.node` names them (NAME, or GRAPH.NAME inside a torch.cond
branch). A name that matches no op is refused, with the names it could have been.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import torch

from stages.lower.fault_target import NamedNode, operator_nodes

# How many op names an error lists when it cannot suggest close ones.
_LISTED = 16


class UnknownOpError(ValueError):
    """An override names no op of the program; the message lists what it could have been."""


@dataclass(frozen=True)
class OpOverrides:
    """Node names (top-level graph) to keep at fp32 in the delegate, and to keep off it."""

    keep_float: frozenset[str] = frozenset()
    keep_off: frozenset[str] = frozenset()

    def record(self) -> dict[str, Any]:
        return {"keep_float": sorted(self.keep_float), "keep_off": sorted(self.keep_off)}

    def __bool__(self) -> bool:
        return bool(self.keep_float or self.keep_off)


def op_names(gm: torch.fx.GraphModule) -> list[str]:
    """Every name an override may give, in graph order (getitems left out)."""
    return [n.qualified for n in operator_nodes(gm) if "getitem" not in str(n.node.target)]


def _unknown(option: str, name: str, known: list[str]) -> UnknownOpError:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    listed = close or known[:_LISTED]
    more = "" if close or len(known) <= _LISTED else f", ... ({len(known)} ops)"
    hint = "did you mean" if close else "ops of this program"
    return UnknownOpError(
        f"{option}: {name!r} is not an op of the exported program; {hint}: "
        f"{', '.join(listed)}{more} (names as backend.fault.node takes them; "
        "numeric_gap.csv's fault_nodes column lists them per op)"
    )


def check_op_names(nodes: list[NamedNode], named: dict[str, list[str]]) -> None:
    """UnknownOpError for the first name of an option (option -> names, checked in order) that is
    none of a program's `nodes` (`operator_nodes`: NAME, or GRAPH.NAME in a torch.cond branch)."""
    anywhere = {n.qualified for n in nodes} | {n.node.name for n in nodes}
    for option, names in named.items():
        for name in names:
            if name not in anywhere:
                known = [n.qualified for n in nodes if "getitem" not in str(n.node.target)]
                raise _unknown(option, name, known)


def resolve_overrides(
    gm: torch.fx.GraphModule, keep_float: list[str], keep_off: list[str]
) -> OpOverrides:
    """The overrides as node names; UnknownOpError for a name that matches no op."""
    known = op_names(gm)
    nodes = operator_nodes(gm)
    top_level = {n.node.name for n in nodes if not n.graph}
    anywhere = {n.qualified for n in nodes} | {n.node.name for n in nodes}

    def resolve(option: str, names: list[str]) -> frozenset[str]:
        for name in names:
            if name not in anywhere:
                raise _unknown(option, name, known)
        # Ops of torch.cond branches always run on the portable runtime at fp32: nothing to do.
        return frozenset(name for name in names if name in top_level)

    return OpOverrides(
        resolve("backend.keep_float", [str(n) for n in keep_float]),
        resolve("backend.keep_off", [str(n) for n in keep_off]),
    )
