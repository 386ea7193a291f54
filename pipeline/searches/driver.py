"""`run_search`: the search sweeper's work. Checks the search, runs it, writes search.json.

The sweep callback (pipeline.sweeps.callback) owns the parent MLflow run, logs search.json to
it and ends the command with the search's exit code (`exit_codes.exit_for_search`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from pipeline.searches.best_so_far import best_so_far, paste_form
from pipeline.searches.decibels import format_db
from pipeline.searches.result import SearchError, SearchResult, write_search_json
from pipeline.searches.trials import TrialBudgetSpent, TrialRunner, ledger_path
from stages.formats.executorch.program import is_executorch_backend

# Options of the search itself: they change how it searches, never a trial's outcome (left out
# of the key its trial outcomes are recorded under).
_SEARCH_OPTIONS = ("search.", "hydra.sweep.")


def _check(config: DictConfig) -> None:
    """What the chosen search needs of the run, before any trial."""
    kind, backend = str(config.search.kind), str(config.backend.name)
    if int(config.search.max_trials) < 2:
        raise SearchError(f"search.max_trials={config.search.max_trials}: give 2 or more")
    precision = str(config.backend.precision)
    if kind == "precision" and precision == "fp32":
        raise SearchError(
            "search=precision looks for ops to keep in float at a lower precision: set "
            "backend.precision=int8 (or fp16)"
        )
    if kind == "precision" and is_executorch_backend(backend) and precision != "int8":
        raise SearchError(
            f"search=precision on backend {backend} keeps ops float through its int8 "
            f"quantizer's filter; at backend.precision={precision} there is nothing to keep: "
            "set backend.precision=int8"
        )


def _search(config: DictConfig, runner: TrialRunner, sweep_dir: Path) -> SearchResult:
    kind = str(config.search.kind)
    if kind == "precision":
        from pipeline.searches.precision import precision_search

        budget = float(config.analyze.accuracy_budget.snr_db)
        return precision_search(runner, bool(config.search.sensitivity), sweep_dir, budget)
    if kind == "delegation":
        from pipeline.searches.delegation import delegation_search

        return delegation_search(runner)
    from pipeline.searches.reduce import reduce_search

    return reduce_search(runner, config, sweep_dir)


def _runner(
    config: DictConfig,
    launcher: Any,
    base: list[str],
    sweep_dir: Path,
    validate: Callable[[Sequence[Sequence[str]]], None] | None,
) -> TrialRunner:
    cache_dir = Path(str(config.cache_dir)).expanduser().resolve()
    key = [a for a in base if not a.startswith(_SEARCH_OPTIONS)]
    ledger = ledger_path(cache_dir, str(config.search.kind), key) if config.cache else None
    runner = TrialRunner(launcher, base, sweep_dir, ledger, int(config.search.max_trials), validate)
    if config.search.resume:
        resumed = runner.load_ledger()
        if resumed:
            print(
                f"search: resuming, {resumed} trial outcome(s) recorded in {ledger}; the trials "
                f"it runs go on from trial {runner.launched + 1}",
                flush=True,
            )
    return runner


def run_search(
    config: DictConfig,
    launcher: Any,
    arguments: list[str],
    validate: Callable[[Sequence[Sequence[str]]], None] | None = None,
) -> list[Any]:
    """Run the search `config.search.kind` names; search.json in the sweep dir says what it found."""
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(config, sweep_dir / "multirun.yaml")
    base = [a for a in arguments if not a.startswith("hydra.sweep.subdir=")]
    kind = str(config.search.kind)
    runner = _runner(config, launcher, base, sweep_dir, validate)
    try:
        _check(config)
        found = _search(config, runner, sweep_dir)
    except SearchError as exc:
        found = SearchResult(kind, None, f"error: {exc}", complete=False)
    except TrialBudgetSpent as exc:
        found = _budget_spent(kind, exc, runner)
    resumed = sum(o.resumed for o in runner.known.values())
    path = write_search_json(sweep_dir, found, runner.outcomes, resumed)
    _print_result(found, len(runner.outcomes), resumed, path)
    return []


def _budget_spent(kind: str, exc: TrialBudgetSpent, runner: TrialRunner) -> SearchResult:
    """The search stopped at search.max_trials: say how to go on, and the best set proved."""
    message = (
        f"{exc} before the search ended: raise search.max_trials and run the same command "
        "again (trials done are reused)"
    )
    best = best_so_far(kind, [*runner.known.values(), *runner.outcomes])
    if best is None:
        return SearchResult(kind, None, message, complete=False)
    message += (
        f"; best so far, trial {best['trial']} ({best['ops']} op(s), passing but not shown "
        f"minimal): {paste_form(best['overrides'])}"
    )
    return SearchResult(kind, None, message, complete=False, extra={"best_so_far": best})


def _print_result(found: SearchResult, trials: int, resumed: int, path: Path) -> None:
    print(f"\n== search {found.kind}: {trials} trial(s) run, {resumed} reused ==", flush=True)
    print(f"   {found.message}")
    if found.result is not None:
        pasted = " ".join(
            f"'{k}=[{','.join(v)}]'" if isinstance(v, list) else f"{k}={v}"
            for k, v in found.result.items()
        )
        print(f"result (paste): {pasted}")
    if found.verified is not None:
        v = found.verified
        print(
            f"verified by trial {v['trial']} (a cold re-run): verdict {v['verdict']}, accuracy "
            f"met {v['accuracy_met']}, min output SNR {format_db(v['min_snr_db'])}"
        )
    command = found.extra.get("command")
    if command:
        print(f"repro: {command}")
    print(f"search.json: {path}", file=sys.stdout, flush=True)
