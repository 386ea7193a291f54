"""Run a search's trials as sweep jobs: a batch at a time, bounded, recorded for resuming.

Each trial is a pipeline job with the search's base overrides plus its own; its job dir is
`<sweep dir>/trial-NNN`. Outcomes go to a ledger under the stage cache keyed by the search's
command, so running the same command again after an interruption skips trials already done and
numbers the trials it runs after the ledger's (a resumed search's proving re-run is not "trial 1",
and no trial of a resumed run writes into the job dir of a recorded one); the stage cache makes
every trial re-run only the stages its overrides change. A proving re-run is never reused, so it
is not recorded: the same command again numbers it as the first run did.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.searches.decibels import format_db
from pipeline.searches.outcomes import TrialOutcome, clear_stale_outcome, read_outcome
from stages.safe_io.json_text import write_json_atomic

# A trial after the baseline is judged by its verdict or accuracy, never by its timings: one timed
# execution and no warm-up (the baseline and the proving re-run keep the command's own).
UNTIMED = ("runtime.iterations=1", "runtime.min_iterations=1", "runtime.warmup=0")


class TrialBudgetSpent(Exception):
    """`search.max_trials` trials ran; the search ends with what it found so far."""


def overrides_key(overrides: Sequence[str]) -> str:
    return "\n".join(sorted(overrides))


def list_override(key: str, names: Sequence[str]) -> str:
    """`backend.keep_float=[a,b]` (names in the order given)."""
    return f"{key}=[{','.join(names)}]"


@dataclass
class TrialRunner:
    """Launches trials and remembers their outcomes (this run's and a resumed run's)."""

    launcher: Any
    base: list[str]
    sweep_dir: Path
    ledger: Path | None
    max_trials: int
    validate: Callable[[Sequence[Sequence[str]]], None] | None = None
    outcomes: list[TrialOutcome] = field(default_factory=list)
    known: dict[str, TrialOutcome] = field(default_factory=dict)
    # The number of the last trial launched: a resumed search goes on from its ledger's.
    launched: int = 0
    # Options every trial between the baseline and the proving re-run adds (said once, at the
    # search's start; trial lines leave them out).
    shared: tuple[str, ...] = ()

    def load_ledger(self) -> int:
        """Outcomes a previous run of this search recorded; how many."""
        if self.ledger is None or not self.ledger.is_file():
            return 0
        for data in json.loads(self.ledger.read_text()).get("trials", []):
            outcome = TrialOutcome.from_record(data)
            self.launched = max(self.launched, outcome.number)
            if not Path(outcome.job_dir).is_dir():
                continue  # its files are gone (a search reads them): run it again
            outcome.resumed = True
            self.known.setdefault(overrides_key(outcome.overrides), outcome)
        return len(self.known)

    def share(self, options: Sequence[str], why: str) -> None:
        """Say once what every trial after the baseline adds; trial lines then leave it out."""
        self.shared = tuple(options)
        print(
            f"search: every trial but the baseline and the proving re-run adds "
            f"{' '.join(options)} ({why}); a trial's line shows what it changes",
            flush=True,
        )

    def _save_ledger(self) -> None:
        if self.ledger is None:
            return
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        trials = [o.record() for o in self.known.values()]
        write_json_atomic(self.ledger, {"trials": trials}, indent=1)  # strict: NaN by name

    @property
    def spent(self) -> int:
        """Trials this search ran, a resumed run's recorded ones included (search.max_trials
        bounds them all: raising it lets the same command go on)."""
        return self.launched

    def run(self, batch: Sequence[Sequence[str]], reuse: bool = True) -> list[TrialOutcome]:
        """Outcomes of `batch` (each a list of overrides), known ones without running them.
        `reuse=False`: a proving re-run, run whatever is known and never recorded for reuse."""
        results: dict[int, TrialOutcome] = {}
        pending: list[tuple[int, list[str]]] = []
        for index, overrides in enumerate(batch):
            known = self.known.get(overrides_key(overrides)) if reuse else None
            if known is not None:
                results[index] = known
            else:
                pending.append((index, list(overrides)))
        if self.spent + len(pending) > self.max_trials:
            raise TrialBudgetSpent(f"search.max_trials={self.max_trials} trials ran")
        if pending:
            for index, outcome in zip(
                [i for i, _ in pending], self._launch([o for _, o in pending], reuse), strict=True
            ):
                results[index] = outcome
        return [results[i] for i in range(len(batch))]

    def next_job_dir(self) -> Path:
        """Where the next trial launched runs (a reduce search writes its program there)."""
        return self.sweep_dir / f"trial-{self.launched + 1:03d}"

    def _launch(self, batch: list[list[str]], record: bool) -> list[TrialOutcome]:
        numbers = [self.launched + i + 1 for i in range(len(batch))]
        self.launched += len(batch)
        jobs = [
            [*self.base, *overrides, f"hydra.sweep.subdir=trial-{n:03d}"]
            for n, overrides in zip(numbers, batch, strict=True)
        ]
        if self.validate is not None:
            self.validate(jobs)
        for number in numbers:  # a dir an interrupted run left holds no outcome of this job
            clear_stale_outcome(self.sweep_dir / f"trial-{number:03d}")
        started = time.perf_counter()
        self.launcher.launch(jobs, initial_job_idx=numbers[0] - 1)
        share = (time.perf_counter() - started) / len(batch)
        found = []
        for number, overrides in zip(numbers, batch, strict=True):
            outcome = read_outcome(number, overrides, self.sweep_dir / f"trial-{number:03d}")
            outcome.seconds = round(share, 3)
            self.outcomes.append(outcome)
            if record:
                self.known[overrides_key(overrides)] = outcome
            found.append(outcome)
            line = progress_line(outcome, self.max_trials, self.shared, proving=not record)
            print(f"search: {line}", flush=True)
        self._save_ledger()
        return found


_SHOWN = 160  # characters of a trial's overrides a progress line shows


def progress_line(
    outcome: TrialOutcome, max_trials: int, shared: Sequence[str] = (), proving: bool = False
) -> str:
    """'trial 3/40 [backend.keep_float=[linear_1]]: verdict pass, min output SNR 4.60 dB,
    budget missed (0.6 s)': what the trial changes (`shared` options left out: the search said
    them once)."""
    what = " ".join(o for o in outcome.overrides if o not in shared) or "no overrides"
    if len(what) > _SHOWN:  # a long list: its length and its start (search.json has it all)
        names = what.count(",") + 1
        what = f"{what[: _SHOWN - 30]}... ({names} names)"
    trial = f"trial {outcome.number}/{max_trials} [{what}]"
    trial += " proving re-run" if proving else ""
    if outcome.failed:
        return f"{trial}: job failed: {outcome.error[:200]}"
    budget = {True: "budget met", False: "budget missed", None: "budget not judged"}
    took = f" ({outcome.seconds:.1f} s)" if outcome.seconds is not None else ""
    task = f", task drop {outcome.task_drop:.4g}" if outcome.task_drop is not None else ""
    return (
        f"{trial}: verdict {outcome.verdict}, min output SNR {format_db(outcome.min_snr_db)}"
        f"{task}, {budget[outcome.accuracy_met]}{took}"
    )


def ledger_path(cache_dir: Path, kind: str, base: Sequence[str]) -> Path:
    """Where the outcomes of this search's trials are kept (one file per kind and command)."""
    digest = hashlib.sha256(f"{kind}\n{overrides_key(base)}".encode()).hexdigest()[:20]
    return cache_dir / "searches" / f"{kind}-{digest}.json"
