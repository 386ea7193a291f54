"""The corpus of ExecuTorch-written files, harvested once per installed ExecuTorch version.

`corpus()` returns the harvested folder (`harvest_executorch_corpus`), kept in the user's cache
(`~/.cache/delegate-debugger/executorch-corpus-<version>/`, or `$EXECUTORCH_CORPUS_DIR`) so
checkouts and Pythons of one machine share it, verified against its manifest's digests before
reuse, and pairs each ETDump with the ETRecord and debug buffer written with it (`Analysis`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS_ENV = "EXECUTORCH_CORPUS_DIR"
_REMOVED = re.compile(r"\.removed-(\d+)$")


@dataclass(frozen=True)
class Analysis:
    """One ETDump and the files written with it (None when the test wrote none)."""

    case: str
    etdump: Path
    etrecord: Path | None
    debug_buffer: Path | None


def corpus_dir() -> Path:
    """The harvested corpus folder; harvested now (minutes) when absent."""
    import executorch.version as et_version

    from tests.helpers.harvest_executorch_corpus import MANIFEST, harvest

    default = test_cache_root() / f"executorch-corpus-{et_version.__version__}"
    folder = Path(os.environ.get(CORPUS_ENV, default))
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".{folder.name}.lock").open("a") as lock:  # xdist workers: one harvests
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / MANIFEST).is_file() and not _intact(folder):
            shutil.rmtree(folder)  # a changed or truncated file: harvest again
        if not (folder / MANIFEST).is_file():
            harvest(folder)
    return folder


def test_cache_root() -> Path:
    """Where the tests keep files ExecuTorch wrote, shared by the machine's checkouts."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "delegate-debugger" / "test-files"


def _intact(folder: Path) -> bool:
    """Every file the manifest lists is there with its digest."""
    try:
        cases = manifest(folder)["cases"]
        for case in cases:
            for entry in case["files"]:
                path = folder / case["case"] / entry["name"]
                if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
                    return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def manifest(folder: Path) -> dict[str, Any]:
    from tests.helpers.harvest_executorch_corpus import MANIFEST

    return dict(json.loads((folder / MANIFEST).read_text()))


def _order(name: str) -> int:
    """Files a test removed are numbered by removal; the last version written has no number."""
    match = _REMOVED.search(name)
    return int(match.group(1)) if match else 1 << 30


def analyses(folder: Path) -> list[Analysis]:
    """Every ETDump with its case's ETRecord (when it has exactly one) and its debug buffer
    (the n-th ETDump with the n-th buffer, in the order they were written)."""
    found = []
    for case in manifest(folder)["cases"]:
        by_kind: dict[str, list[str]] = {}
        for f in case["files"]:
            by_kind.setdefault(f["kind"], []).append(f["name"])
        dumps = sorted(by_kind.get("etdump", []), key=_order)
        buffers = sorted(by_kind.get("debug_buffer", []), key=_order)
        records = by_kind.get("etrecord", [])
        record = folder / case["case"] / records[0] if len(records) == 1 else None
        for position, name in enumerate(dumps):
            buffer = buffers[position] if len(buffers) == len(dumps) else None
            found.append(
                Analysis(
                    case["case"],
                    folder / case["case"] / name,
                    record,
                    folder / case["case"] / buffer if buffer else None,
                )
            )
    return found


def files_of_kind(folder: Path, kind: str) -> list[tuple[str, Path]]:
    """(case, path) of every harvested file of one kind."""
    return [
        (case["case"], folder / case["case"] / f["name"])
        for case in manifest(folder)["cases"]
        for f in case["files"]
        if f["kind"] == kind
    ]
