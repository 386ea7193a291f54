"""The ETRecord this process saved last, kept for the analysis of the same invocation: it gets a
copy instead of reading and parsing the file the lower stage just wrote; and the reference
program an ETRecord refers to, taken from the one this process holds, not read again."""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from stages.formats.etrecord import ETRecord, ETRecordError
from stages.formats.exported_program import exported_program_bytes
from stages.formats.samples import Samples
from stages.handles.handle_info import collect_handle_info
from stages.handover.exported_program import (
    held_exported_program,
    holds_exported_program,
    load_exported_program,
)
from stages.handover.written_files import WrittenFiles
from stages.safe_io.file_digests import known_sha256

_SAVED: WrittenFiles[ETRecord] = WrittenFiles()


def save_etrecord(record: ETRecord, path: Path) -> None:
    """Write atomically (temp file + rename), and keep a copy of what was written."""
    record.save(path)
    _SAVED.keep(Path(path), copy.deepcopy(record))


def load_etrecord(path: Path, method: str | None = None, program: Path | None = None) -> ETRecord:
    """`ETRecord.load`, but the record this process saved at `path` (unchanged) comes from memory
    as a copy, and a referred-to program this process holds is not read."""
    path = Path(path)
    saved = _take_saved(path, method, program)
    if saved is not None:
        return saved
    return ETRecord.load(path, method, program, holds_program=holds_exported_program)


def etrecord_program(record: ETRecord) -> torch.export.ExportedProgram:
    """The reference program with node.meta["debug_handle"] restored (the one this process
    holds when it has it: no second load)."""
    if record.loaded_program is not None:
        return record.loaded_program
    if record.reference_program_bytes is None and record.program_sha256 is not None:
        held = held_exported_program(record.program_sha256)
        if held is not None:
            return held
    return load_exported_program(record.program_bytes(), sha256=record.program_fingerprint)


def generate_etrecord(
    path: Path,
    exported_program: torch.export.ExportedProgram,
    representative_inputs: Samples,
    reference_outputs: Samples,
    model_name: str = "",
    program_bytes: bytes | None = None,
) -> ETRecord:
    """Build an ETRecord from an exported program with debug handles and save it.

    `program_bytes` (torch.export.save output) avoids serializing the program a second time.
    """
    record = ETRecord(
        reference_program_bytes=program_bytes or exported_program_bytes(exported_program),
        representative_inputs=representative_inputs,
        reference_outputs=reference_outputs,
        handles=collect_handle_info(exported_program),
        model_name=model_name,
    )
    save_etrecord(record, path)
    return record


def pack_etrecord(source: Path, out: Path, program: Path | None = None) -> ETRecord:
    """Save `source` as a self-contained ETRecord at `out`, its referenced program embedded."""
    record = load_etrecord(source, program=program)
    if record.loaded_program is not None:
        raise ETRecordError(
            f"{source}: an ExecuTorch ETRecord embeds its programs already; share it as it is"
        )
    record.program_file = None
    save_etrecord(record, out)
    return record


def _take_saved(path: Path, method: str | None, program: Path | None) -> ETRecord | None:
    """A copy of the record kept for this exact, unchanged file, when it is what `load` would
    read: method 'forward', and the program it refers to (if any) the one it names."""
    saved = _SAVED.get(path)
    if saved is None or method not in (None, "forward"):
        return None
    if saved.program_file is not None:
        expected = Path(program) if program is not None else path.parent / saved.program_file
        source = saved.program_source
        if source is None or expected.resolve() != Path(source).resolve():
            return None
        pinned = saved.program_sha256
        if pinned is None or known_sha256(expected) != pinned:  # gone, changed, never hashed
            return None
        if saved.reference_program_bytes is None and not holds_exported_program(pinned):
            return None  # `load` reads and checks a program this process does not hold
    elif program is not None:
        return None
    return copy.deepcopy(saved)
