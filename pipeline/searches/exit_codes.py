"""How a search ends the command: 0 when its result was found and held when re-run, else 1."""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.searches.delegation import delegation_held
from pipeline.searches.result import SEARCH_JSON, read_search_json

SEARCH_FAILED_EXIT_CODE = 1


class SearchEndedError(SystemExit):
    """The search found no result, or its result did not hold when re-run."""


def _held(found: dict[str, object]) -> bool:
    verified = found.get("verified")
    if not isinstance(verified, dict):
        return found.get("result") is not None  # nothing to change: the baseline proves it
    kind = found.get("kind")
    if kind == "precision":
        return verified.get("accuracy_met") is True
    if kind == "delegation":
        return delegation_held(verified.get("verdict"), verified.get("task_met"), None)
    return verified.get("verdict") == "fail" and bool(found.get("same_first_divergence_type"))


def exit_for_search(sweep_dir: Path) -> None:
    """Raise SearchEndedError (exit 1) unless search.json holds a result that held."""
    found = read_search_json(sweep_dir)
    if found is None:
        raise SearchEndedError(SEARCH_FAILED_EXIT_CODE)
    if found.get("result") is None or not _held(found):
        print(
            f"search: no result that holds ({found.get('message')}); see {sweep_dir / SEARCH_JSON}",
            file=sys.stderr,
            flush=True,
        )
        raise SearchEndedError(SEARCH_FAILED_EXIT_CODE)


def search_files(sweep_dir: Path) -> list[Path]:
    """search.json and the files next to it a search wrote (sensitivity table, plot, overlay)."""
    names = (SEARCH_JSON, "sensitivity.csv", "sensitivity.svg", "explorer_sensitivity.json")
    return [sweep_dir / n for n in names if (sweep_dir / n).is_file()]
