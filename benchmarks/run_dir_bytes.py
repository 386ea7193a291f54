"""Bytes a run directory holds on disk, as `du` counts them (a hard-linked file once)."""

from __future__ import annotations

from pathlib import Path


def tree_bytes(path: Path) -> int:
    """Bytes under path, a hard-linked file counted once."""
    seen: set[int] = set()
    total = 0
    for item in path.rglob("*"):
        if item.is_file() and not item.is_symlink():
            stat = item.stat()
            if stat.st_ino not in seen:
                seen.add(stat.st_ino)
                total += stat.st_size
    return total
