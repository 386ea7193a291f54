"""An ETRecord's reference to its exported program: sha256, size and file name, not a copy.

The lower stage writes the ETRecord beside `exported.pt2`; storing the program again inside
the ETRecord doubled the run's disk use. The reference member names the file and proves it:
the loader reads the file beside the ETRecord (or the one the caller passes), checks its size
and sha256, and refuses any other with a message saying how to find or pack the right one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from stages.formats.etrecord_types import ETRecordError
from stages.safe_io.file_digests import known_sha256, read_with_sha256

PROGRAM_REF_MEMBER = "reference_program_ref.json"
# The option a user passes the program with; named in every refusal.
PROGRAM_OPTION = "analyze.exported_program"
PACK_COMMAND = "python -m pipeline.tools.pack_etrecord RUN_DIR --out etrecord_full.zip"
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A bare file name: a hostile reference must not point the loader anywhere but beside itself.
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}")


class ReferencedProgramError(ETRecordError):
    """The exported program an ETRecord refers to is missing or is not the one it names."""


def program_reference(size: int, file_name: str, sha256: str) -> bytes:
    """The reference member's JSON for a program of `size` bytes with this sha256, stored as
    `file_name` beside the ETRecord."""
    _check_file_name(file_name, "program file name")
    return json.dumps({"sha256": sha256, "size": size, "file": file_name}).encode()


def read_referenced_program(
    reference: Any, etrecord: Path, program: Path | None
) -> tuple[bytes, str, str]:
    """The referenced program's bytes (size and sha256 verified), its file name and sha256."""
    sha256, size, file_name = _parse(reference, etrecord)
    candidate = Path(program) if program is not None else etrecord.parent / file_name
    where = f"{PROGRAM_OPTION}={candidate}" if program is not None else f"{candidate} (beside it)"
    if not candidate.is_file():
        raise ReferencedProgramError(
            f"{etrecord}: this ETRecord refers to its exported program by sha256 "
            f"{sha256[:16]}… instead of embedding it, and {where} does not exist; pass the "
            f"{file_name} written with it ({PROGRAM_OPTION}=PATH), or analyse a self-contained "
            f"ETRecord made where the program is (`{PACK_COMMAND}`)"
        )
    actual_size = candidate.stat().st_size
    data, actual = read_with_sha256(candidate) if actual_size == size else (b"", None)
    if actual_size != size or actual != sha256:
        found = f"sha256 {actual[:16]}…" if actual else f"{actual_size} bytes, not {size}"
        raise ReferencedProgramError(
            f"{etrecord}: this ETRecord refers to the exported program with sha256 "
            f"{sha256[:16]}…, but {where} has {found}: the two files do not belong together "
            f"(the program was exported again or replaced); pass the {file_name} written with "
            f"this ETRecord ({PROGRAM_OPTION}=PATH), or re-run the lower stage to write an "
            "ETRecord for this program"
        )
    return data, file_name, sha256


def known_referenced_program(
    reference: Any, etrecord: Path, program: Path | None
) -> tuple[Path, str, str] | None:
    """(path, sha256, file name) of the referenced program when its file is already known to
    this process to have that sha256 and size (`file_digests`: nothing is read), else None."""
    sha256, size, file_name = _parse(reference, etrecord)
    candidate = Path(program) if program is not None else etrecord.parent / file_name
    try:
        known = candidate.stat().st_size == size and known_sha256(candidate) == sha256
    except OSError:
        return None
    return (candidate, sha256, file_name) if known else None


def read_program_file(path: Path, sha256: str, etrecord: str) -> bytes:
    """The bytes of a referenced program the ETRecord was loaded without reading: still the
    file it was (same sha256), and checked like any program read from disk."""
    try:
        data, actual = read_with_sha256(path)
    except OSError as exc:
        raise ReferencedProgramError(
            f"{etrecord}: cannot read its exported program {path} ({exc.strerror or exc})"
        ) from exc
    if actual != sha256:
        raise ReferencedProgramError(
            f"{etrecord}: its exported program {path} changed after the ETRecord was read "
            f"(sha256 {actual[:16]}…, not {sha256[:16]}…); analyse again"
        )
    return data


def _parse(reference: Any, etrecord: Path) -> tuple[str, int, str]:
    what = f"{etrecord}: member {PROGRAM_REF_MEMBER}"
    if not isinstance(reference, dict):
        raise ETRecordError(f"{what} is not a JSON object")
    sha256, size, file_name = reference.get("sha256"), reference.get("size"), reference.get("file")
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ETRecordError(f"{what}: sha256 {sha256!r} is not a lowercase hex sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise ETRecordError(f"{what}: size {size!r} is not a positive byte count")
    _check_file_name(file_name, what)
    return sha256, size, str(file_name)


def _check_file_name(file_name: Any, what: str) -> None:
    if not isinstance(file_name, str) or not _FILE_NAME.fullmatch(file_name):
        raise ETRecordError(
            f"{what}: file {file_name!r} is not a bare file name (a reference names a file "
            "beside the ETRecord, never a path)"
        )
