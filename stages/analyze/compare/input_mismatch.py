"""Runs on other inputs than the ETRecord's: every output that depends on the model's inputs
diverges from the first one on, which a broken op does not do (its error shows at one op, and
ops after it only carry it). The reference is the program run on the ETRecord's representative
inputs, so such a run fails wholesale; the summary then says to check the inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.exact_compare import exact_errors
from stages.analyze.compare.expected_error import ACCUMULATED_DB
from stages.analyze.compare.gap.groups import GapGroup
from stages.analyze.compare.gap.rows import GapRow

# An accumulated error this close to the output's variation (dB) means a different output.
DIFFERENT_OUTPUT_DB = 10.0
# Fewer compared outputs than this say nothing about the inputs.
MIN_OUTPUTS = 2


def input_dependent(program: ExportedProgram) -> set[torch.fx.Node]:
    """Top-level nodes whose value depends on a user input (forward from those placeholders)."""
    names = {
        spec.arg.name
        for spec in program.graph_signature.input_specs
        if spec.kind.name == "USER_INPUT" and hasattr(spec.arg, "name")
    }
    frontier = [n for n in program.graph_module.graph.nodes if n.name in names]
    seen: set[torch.fx.Node] = set(frontier)
    while frontier:
        node = frontier.pop()
        for user in node.users:
            if user not in seen:
                seen.add(user)
                frontier.append(user)
    return seen


def _different(row: GapRow) -> bool:
    """The output is not the reference's at all (not merely off by rounding)."""
    if row.comparison != "float":
        return exact_errors(row.accumulated) > 0
    return row.budget.get(ACCUMULATED_DB, float("inf")) < DIFFERENT_OUTPUT_DB


def every_output_differs(
    rows: Sequence[GapRow], groups: Sequence[GapGroup], program: ExportedProgram
) -> tuple[int, int]:
    """(outputs that differ, input-dependent outputs compared); ops inside cond branches (not
    top-level nodes) count as input-dependent."""
    dependent = input_dependent(program)
    top_level = set(program.graph_module.graph.nodes)
    judged = [
        r
        for r in rows
        if r.status == "ok"
        and r.accumulated
        and not r.follows_flip
        and (groups[r.group].anchor not in top_level or groups[r.group].anchor in dependent)
    ]
    return sum(1 for r in judged if _different(r)), len(judged)


def inputs_note(differ: int, compared: int, etrecord: str) -> str:
    """What to say when every input-dependent output differs; empty otherwise."""
    if compared < MIN_OUTPUTS or differ < compared:
        return ""
    return (
        f"every one of the {compared} compared outputs that depend on the model's inputs differs "
        "from the reference, from the first op on: the run's inputs may not be the ETRecord's "
        "representative inputs (the reference is computed on those). Check: compare what the "
        f"runtime was fed with `representative_inputs.pt` inside {etrecord} (a torch.save list "
        'of input tuples; `python -c "import torch, zipfile; print(torch.load(zipfile.ZipFile('
        f"'{etrecord}').open('representative_inputs.pt'), weights_only=True))\"`), or run "
        "again on those inputs"
    )
