"""The data files `inputs.path` names (a file, a directory or a glob), found without reading them
and without importing torch or numpy: the option check before any stage uses this too."""

from __future__ import annotations

import glob
from pathlib import Path

from stages.export.inputs.errors import InputsConfigError

DATA_SUFFIXES = (".pt", ".pth", ".npy", ".npz")


def matched_files(path: str) -> list[Path]:
    """The data files `inputs.path` names, sorted: the file itself, a directory's .pt/.pth/.npy/.npz
    files (not its subdirectories'), or a glob's matches (`**` recurses)."""
    given = Path(path).expanduser()
    if given.is_file():
        return [given]
    if given.is_dir():
        found = sorted(p for p in given.iterdir() if p.is_file() and p.suffix in DATA_SUFFIXES)
        where = f"directory {given} has no {'/'.join(DATA_SUFFIXES)} file"
    elif glob.has_magic(path):
        found = sorted(Path(p) for p in glob.glob(str(given), recursive=True) if Path(p).is_file())
        where = f"glob {path} matches no file"
    else:
        raise InputsConfigError(
            f"inputs.path={path}: no such file, directory or glob (a relative path is taken from "
            "the directory you ran the command in)"
        )
    if not found:
        raise InputsConfigError(f"inputs.path={path}: the {where}; the dataset is empty")
    return found
