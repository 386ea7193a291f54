"""When `search.max_trials` runs out first: the smallest override set a finished trial already
proved (a precision trial that met the budget, a delegation trial that passed), to paste as it
is; shown passing, not shown minimal."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pipeline.searches.outcomes import TrialOutcome

# Per search kind: the override it varies and what a trial must show to prove a set.
PROOFS: dict[str, tuple[str, Callable[[TrialOutcome], bool]]] = {
    "precision": ("backend.keep_float", lambda o: o.accuracy_met is True),
    "delegation": ("backend.keep_off", lambda o: o.verdict == "pass"),
}


def listed(overrides: Iterable[str], key: str) -> list[str] | None:
    """The names of `key=[a,b]` among `overrides` ([] when absent); None for another form."""
    for override in overrides:
        name, _, value = override.partition("=")
        if name != key:
            continue
        if not (value.startswith("[") and value.endswith("]")):
            return None
        return [v.strip() for v in value[1:-1].split(",") if v.strip()]
    return []


def best_so_far(kind: str, outcomes: Iterable[TrialOutcome]) -> dict[str, Any] | None:
    """The proved set with the fewest ops (earliest trial on a tie), or None."""
    if kind not in PROOFS:
        return None
    key, proves = PROOFS[kind]
    best: tuple[int, int, list[str]] | None = None
    for outcome in outcomes:
        names = listed(outcome.overrides, key)
        if outcome.failed or names is None or not proves(outcome):
            continue
        candidate = (len(names), outcome.number, names)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    if best is None:
        return None
    return {"overrides": {key: best[2]}, "trial": best[1], "ops": best[0], "minimal": False}


def paste_form(overrides: dict[str, list[str]]) -> str:
    """'key=[a,b]' as a shell argument."""
    return " ".join(f"'{k}=[{','.join(v)}]'" for k, v in overrides.items())
