"""What the test suite added to the git working tree: ignored files included, tool caches not."""

from __future__ import annotations

import subprocess
from pathlib import Path

# Caches of the tools themselves (Python, pytest, hypothesis, mypy, ruff, pip), not test outputs.
TOOL_CACHES = (
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    ".egg-info",
    ".import_linter_cache",
)


def tree_status(root: Path) -> set[str] | None:
    """`git status` lines of the checkout at root (ignored and untracked files one by one);
    None outside a git checkout (an sdist, a copied tree)."""
    try:
        done = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain=v1",
                "-z",
                "--ignored=matching",
                "-uall",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    entries = (e for e in done.stdout.split("\0") if e)
    return {e for e in entries if not any(cache in e for cache in TOOL_CACHES)}


def tree_changes(before: set[str], after: set[str]) -> list[str]:
    """Status lines that appeared or went away between two snapshots."""
    return sorted(after ^ before)
