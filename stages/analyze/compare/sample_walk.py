"""One sample's live state while the reference program is walked: reference values, the
runtime values standing in for nodes, the branch each side took at a cond, and what the
walk held at its peak."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.analyze.compare.gap.groups import GapGroup, RuntimeOutput, Value, group_values
from stages.analyze.compare.reference_stream import ReferenceStepper
from stages.analyze.compare.stand_ins import last_stand_in, partition_candidates
from stages.analyze.link.control_flow import (
    CondRecord,
    CondSite,
    predicate_source,
    run_branch,
    runtime_branch,
)
from stages.handles.debug_handles import DebugHandle


@dataclass
class WalkStats:
    """The most op outputs of the reference the comparison held at once (over all samples) and
    their bytes: what bounds its memory."""

    peak_values: int = 0
    peak_bytes: int = 0


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_tensor_bytes(v) for v in value)
    return 0


class SampleWalk:
    """One sample's live state while the program is walked: its reference values, the runtime
    values standing in for nodes (`subst`), and the value each group compares."""

    def __init__(
        self,
        program: ExportedProgram,
        inputs: Sequence[torch.Tensor],
        outputs: list[RuntimeOutput],
        anchor_of: Callable[[tuple[DebugHandle, ...]], torch.fx.Node | None],
        groups: list[GapGroup],
        group_of: dict[DebugHandle, int],
        sample: int = 0,
    ) -> None:
        self.sample = sample  # the evaluation sample's index (inputs.pt's order)
        self.stepper = ReferenceStepper(program, inputs)
        self.logged = {h for out in outputs for h in out.link.debug_handles}
        self.by_anchor: dict[torch.fx.Node, list[Value]] = {}
        for out in outputs:
            anchor = anchor_of(out.link.debug_handles)
            if anchor is not None:
                self.by_anchor.setdefault(anchor, []).append(out.value)
        self.by_partition = partition_candidates(outputs, groups, group_of)
        self.values = group_values(groups, group_of, outputs)
        self.subst: dict[torch.fx.Node, Any] = {}
        # Where a partition output also stands in as an anchor, the branch step of a cond saw the
        # partition's value (substitution order: anchors, partitions, cond branches, anchors).
        self.at_branch: dict[torch.fx.Node, Any] = {}
        self.substituted: set[torch.fx.Node] = set()  # every node ever given a stand-in
        self.fixed: dict[torch.fx.Node, Any] = {}

    @property
    def env(self) -> dict[torch.fx.Node, Any]:
        return self.stepper.env

    def evaluate(self, node: torch.fx.Node) -> None:
        """A top-level node's reference value, and the runtime value standing in for it."""
        ref = self.stepper.step(node)
        anchored = last_stand_in(self.by_anchor.get(node, ()), ref)
        partition = last_stand_in(self.by_partition.get(node, ()), ref, lists=False)
        if anchored is not None:
            self.subst[node] = anchored
            if partition is not None:
                self.at_branch[node] = partition
        elif partition is not None:
            self.subst[node] = partition
        if node in self.subst:
            self.substituted.add(node)

    def _seen_at_branch(self, node: torch.fx.Node | None) -> Any:
        if node is None:
            return None
        return self.at_branch.get(node, self.subst.get(node))

    def branch(self, site: CondSite, record: CondRecord) -> None:
        """The branch each side took at `site` (into `record`); the reference values of the
        runtime's branch ops, their stand-ins, and the cond's outputs its local re-run uses."""
        env = self.env
        pred_value = env.get(site.predicate) if site.predicate is not None else None
        reference = bool(pred_value) if isinstance(pred_value, torch.Tensor) else None
        taken = runtime_branch(site, self.logged, self._seen_at_branch(site.predicate))
        _, compared = predicate_source(site)
        shown = compared if compared is not None else site.predicate
        record.reference_branch.append(reference)
        record.runtime_branch.append(taken)
        record.reference_value.append(env.get(shown) if shown is not None else None)
        record.runtime_value.append(self._seen_at_branch(shown))
        if taken is None:
            return
        operands = [env.get(o) if isinstance(o, torch.fx.Node) else o for o in site.operands]
        values = run_branch(site, taken, operands)
        env.update(values)
        for ph, operand in zip(site.placeholders(taken), site.operands, strict=False):
            if isinstance(operand, torch.fx.Node) and operand in self.subst:
                self.subst[ph] = self._seen_at_branch(operand)
                self.substituted.add(ph)
        for node, ref in values.items():
            if node.op == "call_function":
                anchored = last_stand_in(self.by_anchor.get(node, ()), ref)
                if anchored is not None:
                    self.subst[node] = anchored
                    self.substituted.add(node)
        outs = site.branch_outputs(taken)
        if all(isinstance(o, torch.fx.Node) and o in self.subst for o in outs):
            self.fixed[site.node] = tuple(self.subst[o] for o in outs)

    def release(self, node: torch.fx.Node) -> None:
        for held in (self.env, self.subst, self.at_branch, self.fixed):
            held.pop(node, None)


def note_peak(stats: WalkStats, walks: list[SampleWalk]) -> None:
    """Fold the op outputs held now into `stats` (parameters and inputs belong to the program)."""
    held = [v for w in walks for n, v in w.env.items() if n.op == "call_function"]
    stats.peak_values = max(stats.peak_values, len(held))
    stats.peak_bytes = max(stats.peak_bytes, sum(_tensor_bytes(v) for v in held))
