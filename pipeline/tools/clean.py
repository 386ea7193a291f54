"""`python -m pipeline.tools.clean --keep N`: remove old run dirs, the cache entries only they used, and
their MLflow runs (artifacts included), so disk use stays bounded. `--cache-max-mb MB` trims the
stage cache to MB, least recently used entries first (as a run does after each store past
`cache_max_mb`); with neither, it only says how big the stage cache is.

A run dir is a directory holding `.pipeline/` (the stage records the runner writes). The N most
recent are kept; a cache entry survives while a kept run dir's record names it; an MLflow run
goes with its run dir (matched by its `run_dir` tag). Nothing imports torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.cache.cache_bound import MB, cache_entries, trim_cache
from pipeline.cache.stage_cache import RECORD_NAME, RUN_RECORD_DIR, remove_tree
from pipeline.tracking.store import resolve_tracking_uri, sqlite_database


@dataclass
class CleanPlan:
    """What a clean removes and keeps."""

    kept_runs: list[Path]
    removed_runs: list[Path]
    removed_cache_entries: list[Path]
    removed_sweep_dirs: list[Path] = field(default_factory=list)


def find_run_dirs(outputs: Path) -> list[Path]:
    """Run dirs under outputs/ (single runs and sweep jobs), newest first."""
    found = {
        record_dir.parent for record_dir in outputs.rglob(RUN_RECORD_DIR) if record_dir.is_dir()
    }
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)), reverse=True)


def _digests_used(run_dirs: Iterable[Path]) -> set[tuple[str, str]]:
    used: set[tuple[str, str]] = set()
    for run_dir in run_dirs:
        for record in (run_dir / RUN_RECORD_DIR).glob("*.json"):
            try:
                used.add((record.stem, str(json.loads(record.read_text())["digest"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return used


def _cache_entries(cache_dir: Path) -> list[Path]:
    if not cache_dir.is_dir():
        return []
    return sorted(p.parent for p in cache_dir.glob(f"*/*/{RECORD_NAME}"))


def plan_clean(outputs: Path, cache_dir: Path, keep: int) -> CleanPlan:
    """Decide what goes: every run dir after the `keep` newest, and cache entries no kept run uses."""
    runs = find_run_dirs(outputs)
    kept, removed = runs[:keep], runs[keep:]
    used = _digests_used(kept)
    stale = [e for e in _cache_entries(cache_dir) if (e.parent.name, e.name) not in used]
    kept_parents = {p.parent for p in kept}
    sweep_dirs = sorted(
        {
            p.parent
            for p in removed
            if (p.parent / "multirun.yaml").is_file() and p.parent not in kept_parents
        }
    )
    return CleanPlan(kept, removed, stale, sweep_dirs)


def _tree_bytes(path: Path) -> int:
    """Bytes of files whose last link this removal takes away."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            info = os.lstat(os.path.join(root, name))
            if info.st_nlink == 1:
                total += info.st_size
    return total


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.tools.clean",
        description="Remove all but the N newest run dirs, the cache entries only they used, "
        "and their MLflow runs; trim the stage cache to a size; say how big it is.",
    )
    parser.add_argument("--keep", type=int, default=None, help="run dirs to keep (newest)")
    parser.add_argument(
        "--cache-max-mb",
        type=int,
        default=None,
        help="trim the stage cache to this many MB, least recently used entries first "
        "(entries in use are left)",
    )
    parser.add_argument("--outputs", type=Path, default=Path("outputs"), help="outputs dir")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: OUTPUTS/cache")
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="default: as python -m pipeline: $MLFLOW_TRACKING_URI, else OUTPUTS/mlflow.db",
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    args = parser.parse_args(argv)
    if args.keep is not None and args.keep < 0:
        parser.error("--keep must be >= 0")
    if args.cache_max_mb is not None and args.cache_max_mb < 0:
        parser.error("--cache-max-mb must be >= 0")
    return args


def _store_exists(uri: str) -> bool:
    """False for a sqlite store that does not exist (yet): nothing to list or delete there."""
    database = sqlite_database(uri)
    return database is None or database.is_file()


def _tracking_runs(uri: str, run_dirs: list[Path]) -> list[Any]:
    """The MLflow runs of these run dirs (for --dry-run)."""
    if not run_dirs or not _store_exists(uri):
        return []
    from pipeline.tracking.client import runs_logged_from  # imports MLflow

    return runs_logged_from(uri, run_dirs)


def _delete_tracking_runs(uri: str, run_dirs: list[Path]) -> int:
    """Delete the MLflow runs of removed run dirs."""
    if not run_dirs or not _store_exists(uri):
        return 0
    from pipeline.tracking.client import delete_runs_logged_from  # imports MLflow

    return delete_runs_logged_from(uri, run_dirs)


def _clean_runs(args: argparse.Namespace, outputs: Path, cache_dir: Path) -> None:
    """--keep N: the older run dirs, the cache entries only they used, their MLflow runs."""
    plan = plan_clean(outputs, cache_dir, args.keep)
    uri = resolve_tracking_uri(args.tracking_uri, store_dir=outputs)
    doomed = plan.removed_runs + plan.removed_cache_entries + plan.removed_sweep_dirs
    if args.dry_run:
        for path in doomed:
            print(f"would remove {path}")
        runs = _tracking_runs(uri, plan.removed_runs)
        for run in runs:
            print(f"would delete MLflow run {run.info.run_id} ({run.info.run_name}) in {uri}")
        print(
            f"keeping {len(plan.kept_runs)} run dirs; would remove {len(doomed)} paths "
            f"and {len(runs)} MLflow runs"
        )
        return
    deleted = _delete_tracking_runs(uri, plan.removed_runs)
    freed = 0
    for path in doomed:
        if path.exists():
            freed += _tree_bytes(path)
            remove_tree(path)
    print(
        f"kept {len(plan.kept_runs)} run dirs; removed {len(plan.removed_runs)} run dirs, "
        f"{len(plan.removed_cache_entries)} cache entries, {deleted} MLflow runs; "
        f"freed {freed / 1e6:.1f} MB"
    )


def _trim_cache(cache_dir: Path, max_mb: int, dry_run: bool) -> None:
    """--cache-max-mb MB: least recently used entries go until the cache fits."""
    trim = trim_cache(cache_dir, max_mb * MB, dry_run=dry_run)
    if trim.skipped:
        print(f"stage cache {cache_dir}: another process is trimming it; nothing removed")
        return
    verb = "would remove" if dry_run else "removed"
    for entry in trim.removed:
        print(f"{verb} {entry.path} ({entry.size / MB:.1f} MB)")
    freed = sum(e.size for e in trim.removed) / MB
    left = f"; {len(trim.left_in_use)} in use left" if trim.left_in_use else ""
    print(
        f"stage cache to {max_mb} MB: {verb} {len(trim.removed)} least recently used "
        f"entries ({freed:.1f} MB){left}"
    )


def describe_cache(cache_dir: Path) -> str:
    """'stage cache DIR: N entries, X MB (export 1, lower 2, ...)'."""
    entries = cache_entries(cache_dir)
    stages: dict[str, int] = {}
    for entry in entries:
        stages[entry.path.parent.name] = stages.get(entry.path.parent.name, 0) + 1
    by_stage = ", ".join(f"{name} {count}" for name, count in sorted(stages.items()))
    size = sum(e.size for e in entries) / MB
    return f"stage cache {cache_dir}: {len(entries)} entries, {size:.1f} MB" + (
        f" ({by_stage})" if by_stage else ""
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    outputs = args.outputs.expanduser().resolve()
    if not outputs.is_dir():
        print(f"error: --outputs {outputs} is not a directory", file=sys.stderr)
        return 2
    cache_dir = (args.cache_dir or outputs / "cache").expanduser().resolve()
    if args.keep is not None:
        _clean_runs(args, outputs, cache_dir)
    if args.cache_max_mb is not None:
        _trim_cache(cache_dir, args.cache_max_mb, args.dry_run)
    print(describe_cache(cache_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
