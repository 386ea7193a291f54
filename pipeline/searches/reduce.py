"""search=reduce: the smallest window of ops (ending at the first divergence) that still FAILs
with the same first-divergence op type on the same backend, as a program of its own.

Each trial cuts `ops[start..end]` (end: the first divergence's op) out of the exported program,
its inputs the reference's captured values (stages.export.subgraph_cut), and runs the lower,
run and analyze stages on it. A binary search finds the latest start that still fails; the
result is a directory with exported.pt2, inputs.pt and reference_outputs.pt and one command.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from pipeline.invocation import command_prefix
from pipeline.searches.outcomes import TrialOutcome
from pipeline.searches.result import SearchError, SearchResult, verified_record
from pipeline.searches.trials import TrialRunner
from stages.export.subgraph_cut import (
    CutProgram,
    load_for_cut,
    op_index,
    write_cut,
)
from stages.formats.artifacts import ArtifactName
from stages.handover.samples import load_samples

REPRO_DIR = "repro"
_CUT_FILES = (ArtifactName.EXPORTED_PROGRAM, ArtifactName.INPUTS, ArtifactName.REFERENCE_OUTPUTS)
# Options a cut program replaces: its own fault target, names and stages.
_REPLACED = ("backend.fault.node=", "backend.fault.debug_handle=", "backend.keep_", "stages=")
_REPRO_OPTIONS = ("backend", "analyze.", "runtime", "~backend", "+backend")
# A cut trial runs the stages after the export on the program cut into its job dir.
CUT_STAGES = "stages=[lower,run,analyze]"
_CUT_TRIALS = "each on a program cut out of the exported one: ops S..E in reduce-ops-S-E"


class _Cuts:
    """Cut trials: window start → (outcome, cut), so none runs twice."""

    def __init__(self, runner: TrialRunner, program: Any, samples: Any, fault: str | None) -> None:
        self.runner, self.program, self.samples, self.fault = runner, program, samples, fault
        self.tried: dict[int, tuple[TrialOutcome | None, CutProgram | None]] = {}

    def overrides(self, cut: CutProgram, start: int, end: int) -> list[str]:
        found = [CUT_STAGES, f"tracking.run_name=reduce-ops-{start}-{end}"]
        if self.fault and self.fault in cut.names:
            found.append(f"backend.fault.node={cut.names[self.fault]}")
        return found

    def trial(self, start: int, end: int) -> tuple[TrialOutcome | None, CutProgram | None]:
        if start in self.tried:
            return self.tried[start]
        try:
            cut = write_cut(self.program, self.samples, start, end, self.runner.next_job_dir())
        except Exception as exc:  # SubgraphCutError, or a window torch.export cannot take
            print(f"search: ops {start}..{end} cannot be cut out: {exc}", flush=True)
            self.tried[start] = (None, None)
            return self.tried[start]
        outcome = self.runner.run([self.overrides(cut, start, end)])[0]  # resumable
        self.tried[start] = (outcome, cut)
        return self.tried[start]


def _fault_name(config: DictConfig, program: Any) -> str | None:
    """The original fault's node name (a debug handle resolved to its node)."""
    fault = config.backend.fault
    if fault.node:
        return str(fault.node)
    if fault.debug_handle is not None:
        for node in program.graph.nodes:
            if node.meta.get("debug_handle") == int(fault.debug_handle):
                return str(node.name)
    return None


def _smallest_start(cuts: _Cuts, end: int, same: Any) -> int | None:
    """The latest window start whose cut still fails the same way (binary search)."""
    if same(cuts.trial(end, end)[0]):
        return end
    if not same(cuts.trial(0, end)[0]):
        return None
    low, high = 0, end - 1  # fails(low) holds
    while low < high:
        middle = (low + high + 1) // 2
        if same(cuts.trial(middle, end)[0]):
            low = middle
        else:
            high = middle - 1
    return low


def _repro(sweep_dir: Path, cut: CutProgram, overrides: list[str], base: list[str]) -> list[str]:
    """Copy the cut's three files to <sweep dir>/repro; the command that reproduces the FAIL."""
    target = sweep_dir / REPRO_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in _CUT_FILES:
        shutil.copyfile(cut.directory / name, target / name)
    options = [a for a in base if a.startswith(_REPRO_OPTIONS)]
    kept = [o for o in overrides if not o.startswith("tracking.")]
    return [*command_prefix(), *options, *kept, f"hydra.run.dir={target}"]


def _prove(runner: TrialRunner, sweep_dir: Path, overrides: list[str]) -> TrialOutcome:
    """The proving re-run: the repro's files in a trial dir of their own, nothing cached."""
    proving_dir = runner.next_job_dir()
    proving_dir.mkdir(parents=True, exist_ok=True)
    for name in _CUT_FILES:
        shutil.copyfile(sweep_dir / REPRO_DIR / name, proving_dir / name)
    return runner.run([[*overrides, "cache=false"]], reuse=False)[0]


def reduce_search(runner: TrialRunner, config: DictConfig, sweep_dir: Path) -> SearchResult:
    """Cut, bisect, write the repro, re-run it once (cold) to prove it."""
    runner.share([CUT_STAGES], _CUT_TRIALS)
    baseline = runner.run([[]])[0]
    if baseline.failed:
        raise SearchError(f"the run without overrides failed: {baseline.error}")
    if baseline.verdict != "fail":
        return SearchResult(
            "reduce", None, f"the run's verdict is {baseline.verdict}: nothing to reduce"
        )
    job = Path(baseline.job_dir)
    program = load_for_cut(job / ArtifactName.EXPORTED_PROGRAM)
    end = op_index(program, baseline.first_divergence_nodes)
    if end is None:
        raise SearchError("the first divergence names no top-level op to cut at")
    types = baseline.first_divergence_types
    runner.base = [a for a in runner.base if not a.startswith(_REPLACED)]
    cuts = _Cuts(
        runner, program, load_samples(job / ArtifactName.INPUTS), _fault_name(config, program)
    )

    def same(outcome: TrialOutcome | None) -> bool:
        return (
            outcome is not None
            and outcome.verdict == "fail"
            and outcome.first_divergence_types == types
        )

    start = _smallest_start(cuts, end, same)
    if start is None:
        return SearchResult(
            "reduce", None, "no cut of the ops up to the first divergence fails the same way"
        )
    _, cut = cuts.trial(start, end)
    if cut is None:
        raise SearchError(f"the cut of ops {start}..{end} failed before and cannot be written")
    overrides = cuts.overrides(cut, start, end)
    command = _repro(sweep_dir, cut, overrides, runner.base)
    proof = _prove(runner, sweep_dir, overrides)
    result: dict[str, Any] = {
        "stages": ["lower", "run", "analyze"],
        "hydra.run.dir": str(sweep_dir / REPRO_DIR),
    }
    result |= {o.split("=", 1)[0]: o.split("=", 1)[1] for o in overrides if "fault" in o}
    return SearchResult(
        "reduce",
        result,
        f"{cut.ops} op(s) (ops {start}..{end} of {len(baseline.delegated_ops)} delegated) fail "
        f"the same way: first divergence {'+'.join(types)}",
        True,
        verified_record(proof),
        {
            "program": str(sweep_dir / REPRO_DIR / ArtifactName.EXPORTED_PROGRAM),
            "command": shlex.join(command),
            "window": [start, end],
            "ops": cut.ops,
            "first_divergence_op_types": types,
            "same_first_divergence_type": same(proof),
        },
    )
