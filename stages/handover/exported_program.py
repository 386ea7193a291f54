"""The exported program this process holds, by the sha256 of its file: the lower and analyze
stages of one invocation take a copy instead of loading exported.pt2 again (ViT-B's 347 MB takes
seconds to load; a copy, its weights shared, takes milliseconds). One is kept: a sweep's next job
loads another, and two big programs must not be held at once."""

from __future__ import annotations

import copy
import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.formats.exported_program import parse_exported_program, read_exported_program_file
from stages.handover.tensor_versions import has_version, tensor_versions
from stages.handover.written_files import WrittenFiles
from stages.safe_io.file_digests import known_sha256


@dataclass(frozen=True)
class _Kept:
    """A loaded program and the version counters of the tensors its copies share."""

    program: ExportedProgram
    versions: tuple[int, ...] | None  # of _shared_tensors(program) when kept


# The program the last load (or the export stage's save) gave, by the sha256 of its file.
LOADED_KEPT = 1
_LOADED: WrittenFiles[_Kept] = WrittenFiles(capacity=LOADED_KEPT)


def load_exported_program(
    source: Path | bytes, what: str | None = None, sha256: str | None = None
) -> ExportedProgram:
    """Load through the safe loader, then node.meta["debug_handle"] restored from custom meta.

    A program this process already holds (same sha256) is not read again: the caller gets a
    copy whose graph it may change and whose weight, buffer and constant tensors are the held
    ones (read them, never write into them). `sha256`: the digest of `source` when the caller
    knows it (bytes only), to save hashing them again.
    """
    if isinstance(source, bytes):
        key = sha256 or hashlib.sha256(source).hexdigest()
        held = _held(key)
        if held is not None:
            return held
        return _load(source, what or "exported program", key)
    path = Path(source)
    what = what or str(path)
    known = known_sha256(path)
    held = _held(known) if known is not None else None
    if held is not None:
        return held
    data, key = read_exported_program_file(path, what)
    held = _held(key)
    return held if held is not None else _load(data, what, key)


def _load(data: bytes, what: str, key: str) -> ExportedProgram:
    """Parse (safely), keep under `key`, hand out a copy."""
    _LOADED.make_room()  # the program being loaded and the one it replaces are not both held
    program = parse_exported_program(data, what)
    copied = _copy(program)
    shared = _shared_tensors(program)
    _LOADED.keep_digest(key, _Kept(program, tensor_versions(shared)))
    return copied


def remember_exported_program(program: ExportedProgram, sha256: str) -> None:
    """Keep the program the export stage just saved (its file has this sha256): the lower and
    analyze stages of the same invocation take a copy instead of loading it again.

    The caller must not change `program` afterwards (the export stage does not).
    """
    _LOADED.make_room()
    _keep(sha256, program)


def holds_exported_program(sha256: str) -> bool:
    """Whether this process holds the program whose file has this sha256 (nothing is read)."""
    return sha256 in _LOADED


def held_exported_program(sha256: str) -> ExportedProgram | None:
    """A copy of the program held under this sha256 (as `load_exported_program` gives), or None."""
    return _held(sha256)


def held_exported_tensors(sha256: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The state dict and constants of the program held under this sha256 (the held objects
    themselves: read them, never write), or None when none is held or its tensors were written."""
    kept = _LOADED.get_digest(sha256)
    if kept is None or _versions(kept.program) != kept.versions:
        return None
    return dict(kept.program.state_dict), dict(kept.program.constants)


def _held(key: str) -> ExportedProgram | None:
    """A copy of the program kept under `key`, unless none is or its tensors were written to."""
    kept = _LOADED.get_digest(key)
    if kept is None:
        return None
    if _versions(kept.program) != kept.versions:
        # Something wrote into a shared weight in place: never hand out the changed values.
        _LOADED.drop_digest(key)
        return None
    return _copy(kept.program)


def _keep(key: str, program: ExportedProgram) -> None:
    _LOADED.keep_digest(key, _Kept(program, _versions(program)))


def _shared_tensors(program: ExportedProgram) -> list[torch.Tensor]:
    """The weights, buffers and tensor constants copies share (inference tensors, which keep no
    version counter, are copied instead)."""
    values = [*program.state_dict.values(), *program.constants.values()]
    return [t for t in values if isinstance(t, torch.Tensor) and has_version(t)]


def _versions(program: ExportedProgram) -> tuple[int, ...] | None:
    return tensor_versions(_shared_tensors(program))


def _copy(program: ExportedProgram) -> ExportedProgram:
    """A copy callers may change (lowering rewrites graphs) without touching the kept one; its
    tensors are the kept ones (no second copy of the weights)."""
    memo: dict[int, Any] = {id(t): t for t in _shared_tensors(program)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree LeafSpec deprecation
        return copy.deepcopy(program, memo)
