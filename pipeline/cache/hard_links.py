"""Place a file at a second path without copying its bytes where the filesystem allows."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def link_or_copy(src: Path, dst: Path) -> None:
    """Atomically make dst a hard link to src (a copy across filesystems), unless it already is."""
    if dst.exists() and os.path.samefile(src, dst):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    os.replace(tmp, dst)
