"""A search's result and `search.json`, the file in the sweep dir that holds it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.searches.outcomes import TrialOutcome
from stages.safe_io.json_text import write_json_atomic

SEARCH_JSON = "search.json"


class SearchError(Exception):
    """The search cannot start or go on (its message says why and what to do)."""


@dataclass
class SearchResult:
    """What a search found: the overrides to paste, the trials, and the proving re-run."""

    kind: str
    result: dict[str, Any] | None
    message: str
    complete: bool = True
    verified: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def verified_record(outcome: TrialOutcome | None) -> dict[str, Any] | None:
    """The proving re-run's verdict and accuracy."""
    if outcome is None:
        return None
    return {
        "trial": outcome.number,
        "job_dir": outcome.job_dir,
        "verdict": outcome.verdict,
        "accuracy_met": outcome.accuracy_met,
        "min_snr_db": outcome.min_snr_db,
        "task_met": outcome.task_met,
        "task_drop": outcome.task_drop,
        "first_divergence_op_types": outcome.first_divergence_types,
        "error": outcome.error,
    }


def write_search_json(
    sweep_dir: Path, found: SearchResult, trials: list[TrialOutcome], resumed: int
) -> Path:
    """search.json: kind, result, trials, verified (and a reduce's program and command)."""
    path = sweep_dir / SEARCH_JSON
    data = {
        "kind": found.kind,
        "result": found.result,
        "message": found.message,
        "complete": found.complete,
        "trials": len(trials),
        "trials_resumed": resumed,
        "verified": found.verified,
        **found.extra,
        "trial_log": [t.record() for t in trials],
    }
    write_json_atomic(path, data, indent=2, default=str)  # strict JSON: NaN and inf by name
    return path


def read_search_json(sweep_dir: Path) -> dict[str, Any] | None:
    path = sweep_dir / SEARCH_JSON
    return json.loads(path.read_text()) if path.is_file() else None
