"""Write a file so readers never see half of it: into a temp file beside it, then rename."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path to write; it replaces `path` on success and is removed on failure."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> None:
    """`path` holds `text` (UTF-8), or is left as it was."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`path` holds `data`, or is left as it was."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
