"""Place files at second paths without copying their bytes where the filesystem allows."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stages.safe_io.atomic_write import atomic_path
from stages.safe_io.file_digests import file_sha256

_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
Record = tuple[Path, Mapping[str, Any]]  # a JSON file to write and its content


def link_or_copy(src: Path, dst: Path) -> None:
    """Atomically make dst a hard link to src (a copy across filesystems), unless it already is."""
    place_files({dst.name: (src, dst)})


def place_files(
    files: Mapping[str, tuple[Path, Path]], records: Sequence[Record] = (), publish: bool = False
) -> None:
    """Place each (source, destination) atomically as a hard link (a copy across filesystems),
    then write each record as JSON, last: a record marks the files before it complete.
    `publish`: each placed file is made read-only (never edited in place) and its sha256 goes
    into every record's `sha256`, under the file's key."""
    hashes: dict[str, str] = {}
    steps: list[tuple[str, Path, Path | None, Mapping[str, Any] | None]] = [
        (key, dst, src, None) for key, (src, dst) in files.items()
    ]
    steps += [("", path, None, record) for path, record in records]
    for key, dst, src, record in steps:
        if src is None or not (dst.exists() and os.path.samefile(src, dst)):
            dst.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(dst) as tmp:
                if src is None:
                    written = {**(record or {}), **({"sha256": hashes} if publish else {})}
                    text = json.dumps(written, indent=2, sort_keys=True, default=str)
                    tmp.write_text(text, encoding="utf-8")
                else:
                    tmp.unlink(missing_ok=True)  # left by a process that died mid-link
                    try:
                        os.link(src, tmp)
                    except OSError:
                        shutil.copy2(src, tmp)
        if publish and src is not None:
            mode = dst.stat().st_mode
            if mode & _WRITE_BITS:
                dst.chmod(mode & ~_WRITE_BITS)
            hashes[key] = file_sha256(dst)
