"""ETRecord: everything the analysis needs from ahead-of-time, in one zip.

Members: a version marker, the reference (exported) program with debug handles (embedded, or
referred to by sha256 when it is stored beside the ETRecord: `etrecord_program_ref`),
representative inputs, reference outputs, per-handle op/source info, and (added by the lower
stage) the lowered graph, each partition's backend and delegate debug-handle map. Loading goes
through `stages.safe_io.safe_load`: bounded zip reads, weights-only tensor files, a checked
reference program whose hash is verified when it is referred to. ExecuTorch's own ETRecord format is recognised and checked by
`executorch_etrecord.verify_executorch_etrecord` before anything else reads it. The stages save
and load it through `stages.handover.etrecord` (the copy kept for the analysis of the same
process, the program it holds).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from stages.formats.artifacts import ArtifactName
from stages.formats.etrecord_program_ref import (
    PROGRAM_REF_MEMBER,
    ReferencedProgramError,
    known_referenced_program,
    program_reference,
    read_program_file,
    read_referenced_program,
)
from stages.formats.etrecord_types import DelegateMapRecord, ETRecordError
from stages.formats.executorch.etrecord import is_executorch_etrecord, verify_executorch_etrecord
from stages.formats.pt2_archive import check_pt2_members
from stages.formats.samples import Samples
from stages.handles.debug_handles import DebugHandle
from stages.handles.handle_info import HandleInfo
from stages.safe_io.atomic_write import atomic_path
from stages.safe_io.json_text import json_text
from stages.safe_io.reproducible_zip import ReproducibleZipFile
from stages.safe_io.safe_load import BoundedZip, UnsafePayloadError, ZipLimitError, load_tensors
from stages.safe_io.tensor_file import repack_stored

__all__ = [
    "DelegateMapRecord",
    "ETRecord",
    "ETRecordError",
    "ReferencedProgramError",
]

ETRECORD_FORMAT = "delegate-debugger-etrecord"
ETRECORD_VERSION = 1

VERSION_MEMBER = "etrecord_version.json"
PROGRAM_MEMBER = "reference_program.pt2"
INPUTS_MEMBER = "representative_inputs.pt"
OUTPUTS_MEMBER = "reference_outputs.pt"
HANDLES_MEMBER = "debug_handles.json"
LOWERED_GRAPH_MEMBER = "lowered_graph.txt"
DELEGATE_MAPS_MEMBER = "delegate_maps.json"
LOWERING_INFO_MEMBER = "lowering_info.json"
_REQUIRED = (VERSION_MEMBER, INPUTS_MEMBER, OUTPUTS_MEMBER, HANDLES_MEMBER)


@dataclass
class ETRecord:
    """In-memory ETRecord; `save`/`load` move it to and from a zip."""

    # None: not read, because this process holds the program (`program_bytes()` reads it then).
    reference_program_bytes: bytes | None
    representative_inputs: Samples
    reference_outputs: Samples
    handles: dict[DebugHandle, HandleInfo]
    model_name: str = ""
    lowered_graph: str | None = None
    delegate_maps: list[DelegateMapRecord] = field(default_factory=list)
    lowering_info: dict[str, Any] = field(default_factory=dict)
    # None: `save` embeds the program (self-contained, for sharing). A file name: the program is
    # stored beside the ETRecord under that name, and `save` writes only its sha256 and size.
    program_file: str | None = None
    # A reader that already holds the reference program (ExecuTorch's format) sets it here.
    loaded_program: torch.export.ExportedProgram | None = field(
        default=None, repr=False, compare=False
    )
    # sha256 of reference_program_bytes when the writer or loader knows it (hashed once if not).
    program_sha256: str | None = field(default=None, repr=False, compare=False)
    # The file the program was referred to in, when its bytes were not read.
    program_source: Path | None = field(default=None, repr=False, compare=False)

    @property
    def program_fingerprint(self) -> str:
        """sha256 of the reference program bytes: ties ETDumps and lowered programs to it."""
        if self.program_sha256 is None:
            self.program_sha256 = hashlib.sha256(self.program_bytes()).hexdigest()
        return self.program_sha256

    def program_bytes(self) -> bytes:
        """The reference program's bytes (read now, and verified, if loading did not read them)."""
        if self.reference_program_bytes is None:
            if self.program_source is None or self.program_sha256 is None:
                raise ETRecordError("an ETRecord without its program bytes names no program file")
            data = read_program_file(self.program_source, self.program_sha256, "ETRecord")
            check_pt2_members(data, f"exported program {self.program_source}")
            self.reference_program_bytes = data
        return self.reference_program_bytes

    def _program_size(self) -> int:
        """The program's size in bytes, from its file when its bytes were not read."""
        if self.reference_program_bytes is None and self.program_source is not None:
            return Path(self.program_source).stat().st_size
        return len(self.program_bytes())

    def save(self, path: Path) -> None:
        """Write atomically (temp file + rename)."""
        if self.loaded_program is not None:
            raise ETRecordError(
                f"{path}: this ETRecord was read from ExecuTorch's format and cannot be saved in "
                "this tool's; keep the original file"
            )
        path = Path(path)
        with (
            atomic_path(path) as tmp,
            ReproducibleZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive,
        ):
            fingerprint = self.program_fingerprint
            marker = {
                "format": ETRECORD_FORMAT,
                "version": ETRECORD_VERSION,
                "model_name": self.model_name,
                "program_fingerprint": fingerprint,
            }
            archive.writestr(VERSION_MEMBER, json.dumps(marker))
            if self.program_file is None:
                archive.writestr(PROGRAM_MEMBER, self.program_bytes())
            else:
                archive.writestr(
                    PROGRAM_REF_MEMBER,
                    program_reference(self._program_size(), self.program_file, fingerprint),
                )
            archive.writestr(INPUTS_MEMBER, _tensor_bytes(self.representative_inputs))
            archive.writestr(OUTPUTS_MEMBER, _tensor_bytes(self.reference_outputs))
            handles = {str(h): asdict(info) for h, info in sorted(self.handles.items())}
            archive.writestr(HANDLES_MEMBER, json.dumps(handles))
            if self.lowered_graph is not None:
                archive.writestr(LOWERED_GRAPH_MEMBER, self.lowered_graph)
            if self.delegate_maps:
                archive.writestr(
                    DELEGATE_MAPS_MEMBER, json.dumps([_map_to_json(m) for m in self.delegate_maps])
                )
            if self.lowering_info:
                archive.writestr(LOWERING_INFO_MEMBER, json_text(self.lowering_info))

    @classmethod
    def load(
        cls,
        path: Path,
        method: str | None = None,
        program: Path | None = None,
        holds_program: Callable[[str], bool] | None = None,
    ) -> ETRecord:
        """Read and validate; every problem is an ETRecordError naming the file. `method`: the
        program method to read (ExecuTorch programs with several; this tool's have `forward`).
        An ETRecord that refers to its program reads `program`, else the file it names beside it,
        unless `holds_program(sha256)` says the caller holds it (then it is not read).
        """
        path = Path(path)
        try:
            archive = BoundedZip(path, str(path))
        except FileNotFoundError as exc:
            raise ETRecordError(f"{path}: no such ETRecord file") from exc
        except OSError as exc:
            raise ETRecordError(f"{path}: cannot read ({exc.strerror or exc})") from exc
        except ZipLimitError as exc:
            raise ETRecordError(
                f"{exc}; not a readable ETRecord (re-run the export stage to write it again)"
            ) from exc
        with archive:
            try:
                return cls._from_archive(archive, path, method, program, holds_program)
            except UnsafePayloadError as exc:
                raise ETRecordError(str(exc)) from exc
            except (EOFError, KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ETRecordError(f"{path}: corrupt ETRecord member ({exc})") from exc

    @classmethod
    def _from_archive(
        cls,
        archive: BoundedZip,
        path: Path,
        method: str | None = None,
        program_path: Path | None = None,
        holds_program: Callable[[str], bool] | None = None,
    ) -> ETRecord:
        names = set(archive.names())
        if VERSION_MEMBER not in names and is_executorch_etrecord(archive.names()):
            return cls(**_executorch_view(archive, path, method, program_path))
        if method not in (None, "forward"):
            raise ETRecordError(
                f"{path} records one method, 'forward' (this tool's ETRecord); "
                f"analyze.method={method!r} names none of it"
            )
        marker = _checked_marker(archive, names, path)
        program, program_file, sha256, source = _reference_program(
            archive, names, path, program_path, holds_program
        )
        inputs = _samples(archive.read(INPUTS_MEMBER), f"{path} member {INPUTS_MEMBER}")
        outputs = _samples(archive.read(OUTPUTS_MEMBER), f"{path} member {OUTPUTS_MEMBER}")
        handles = {
            int(h): HandleInfo(**{k: tuple(v) for k, v in info.items()})
            for h, info in _json(archive, HANDLES_MEMBER, path).items()
        }
        lowered_graph = (
            archive.read(LOWERED_GRAPH_MEMBER).decode() if LOWERED_GRAPH_MEMBER in names else None
        )
        maps = (
            [_map_from_json(m) for m in _json(archive, DELEGATE_MAPS_MEMBER, path)]
            if DELEGATE_MAPS_MEMBER in names
            else []
        )
        info = _json(archive, LOWERING_INFO_MEMBER, path) if LOWERING_INFO_MEMBER in names else {}
        return cls(
            reference_program_bytes=program,
            representative_inputs=inputs,
            reference_outputs=outputs,
            handles=handles,
            model_name=str(marker.get("model_name", "")),
            lowered_graph=lowered_graph,
            delegate_maps=maps,
            lowering_info=dict(info),
            program_file=program_file,
            program_sha256=sha256,
            program_source=source,
        )


def _executorch_view(
    archive: BoundedZip, path: Path, method: str | None, program_path: Path | None
) -> dict[str, Any]:
    """ExecuTorch's ETRecord, checked then read; the exported fp32 program (given, or beside
    it) is the reference of an int8/fp16 program (stages.formats.float_reference)."""
    verify_executorch_etrecord(archive, str(path))
    from stages.formats.executorch.etrecord_reader import read_executorch_etrecord

    float_program = program_path or path.parent / ArtifactName.EXPORTED_PROGRAM
    return read_executorch_etrecord(
        repack_stored(archive),
        str(path),
        method,
        float_program if float_program.is_file() else None,
    )


def _checked_marker(archive: BoundedZip, names: set[str], path: Path) -> dict[str, Any]:
    """The version marker of this tool's ETRecord, after its required members are found."""
    missing = [m for m in _REQUIRED if m not in names]
    if len(missing) == len(_REQUIRED):  # no member of ours: not this format at all
        shown = ", ".join(sorted(names)[:4]) + (", ..." if len(names) > 4 else "")
        raise ETRecordError(
            f"{path}: not an ETRecord: the zip has neither ExecuTorch's marker member "
            f"ETRECORD_V0 nor this tool's {VERSION_MEMBER} (it holds {shown}); a truncated "
            "or partly copied file reads like this: write or copy it again"
        )
    if missing:
        raise ETRecordError(f"{path}: ETRecord is missing member(s) {missing}")
    marker = _json(archive, VERSION_MEMBER, path)
    if not isinstance(marker, dict) or marker.get("format") != ETRECORD_FORMAT:
        raise ETRecordError(f"{path}: {VERSION_MEMBER} does not mark an ETRecord")
    if marker.get("version") != ETRECORD_VERSION:
        raise ETRecordError(
            f"{path}: ETRecord version {marker.get('version')!r} is not supported "
            f"(this tool reads version {ETRECORD_VERSION}); re-run the export stage"
        )
    return marker


def _reference_program(
    archive: BoundedZip,
    names: set[str],
    path: Path,
    program_path: Path | None,
    holds_program: Callable[[str], bool] | None,
) -> tuple[bytes | None, str | None, str | None, Path | None]:
    """The embedded program, or the referred-to one (hash verified; not read when this process
    holds it), its file name, sha256 and, when not read, its path."""
    if (PROGRAM_MEMBER in names) == (PROGRAM_REF_MEMBER in names):
        raise ETRecordError(
            f"{path}: ETRecord must hold exactly one of {PROGRAM_MEMBER} (the program) and "
            f"{PROGRAM_REF_MEMBER} (its hash); re-run the lower stage to write it again"
        )
    if PROGRAM_MEMBER in names:
        program = archive.read(PROGRAM_MEMBER)
        check_pt2_members(program, f"{path} member {PROGRAM_MEMBER}")
        return program, None, None, None
    reference = _json(archive, PROGRAM_REF_MEMBER, path)
    known = known_referenced_program(reference, path, program_path)
    if known is not None and holds_program is not None and holds_program(known[1]):
        # This process holds that program (loaded or saved from the same bytes): not read again.
        candidate, sha256, program_file = known
        return None, program_file, sha256, candidate
    program, program_file, sha256 = read_referenced_program(reference, path, program_path)
    check_pt2_members(program, f"{path}'s referenced program {program_path or program_file}")
    return program, program_file, sha256, None


def _tensor_bytes(samples: Samples) -> bytes:
    buffer = io.BytesIO()
    torch.save([tuple(s) for s in samples], buffer)
    return buffer.getvalue()


def _samples(data: bytes, what: str) -> Samples:
    loaded = load_tensors(data, what)
    if not isinstance(loaded, list) or not all(isinstance(s, tuple | list) for s in loaded):
        raise ETRecordError(f"{what}: expected a list of tensor tuples")
    return [tuple(s) for s in loaded]


def _json(archive: BoundedZip, member: str, path: Path) -> Any:
    raw = archive.read(member)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        kind = "a pickle payload" if raw[:1] == b"\x80" else "invalid JSON"
        raise ETRecordError(
            f"{path}: member {member} carries {kind}, not JSON; refusing it"
        ) from exc


def _map_to_json(record: DelegateMapRecord) -> dict[str, Any]:
    return {
        "partition_id": record.partition_id,
        "backend_name": record.backend_name,
        "debug_handle_map": [[ident, list(h)] for ident, h in record.debug_handle_map.items()],
        "delegated_handles": list(record.delegated_handles),
    }


def _map_from_json(data: dict[str, Any]) -> DelegateMapRecord:
    return DelegateMapRecord(
        partition_id=int(data["partition_id"]),
        backend_name=str(data["backend_name"]),
        debug_handle_map={
            (ident if isinstance(ident, int | str) else str(ident)): tuple(int(h) for h in handles)
            for ident, handles in data["debug_handle_map"]
        },
        delegated_handles=tuple(int(h) for h in data.get("delegated_handles", ())),
    )
