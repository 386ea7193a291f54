"""Place a file at a second path without copying its bytes where the filesystem allows."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from stages.safe_io.atomic_write import atomic_path


def link_or_copy(src: Path, dst: Path) -> None:
    """Atomically make dst a hard link to src (a copy across filesystems), unless it already is."""
    if dst.exists() and os.path.samefile(src, dst):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dst) as tmp:
        tmp.unlink(missing_ok=True)  # left by a process that died mid-link
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copy2(src, tmp)
