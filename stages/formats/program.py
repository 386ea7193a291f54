"""The lowered program file (`lowered_program.zip`; not ExecuTorch's `.pte`): what the run stage executes.

A zip: `program.json` (version marker, instruction list), `constants.pt` (weights-only tensors
used by operator calls), `delegates/<partition>.bin` (each delegate's processed bytes), and the
named data delegates refer to by key (`named_data/<key>`, listed in `named_data.json`; see
stages.formats.named_data). Operator calls name ATen ops; delegate calls name a backend and carry
its processed bytes. Loading needs none of the export stage's Python objects and never unpickles
anything but tensors.

Weights are stored once: with `weights=` the writer replaces byte ranges that repeat a member of
the exported program beside it, and named data equal to a whole member, by references
(`external_weights.json`, pinned by that file's sha256; see stages.formats.shared_weights), and
the loader splices them back.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from stages.formats.named_data import (
    NAMED_DATA_DIR,
    NAMED_DATA_INDEX,
    NamedData,
    NamedDataError,
    byte_view,
    index_document,
    member_name,
    read_index,
)
from stages.formats.shared_weights import (
    EXTERNAL_MEMBER,
    SharedWeightsError,
    WeightFile,
    restore,
    share_program,
    weight_file_beside,
)
from stages.handles.debug_handles import DebugHandle
from stages.op_encoding import OpEncodingError, ValueId, decode_arg, resolve_op
from stages.safe_io.atomic_write import atomic_path, declare_digest
from stages.safe_io.digesting_file import DigestingFile
from stages.safe_io.reproducible_zip import ReproducibleZipFile
from stages.safe_io.safe_load import BoundedZip, UnsafePayloadError, ZipLimitError, load_tensors

PROGRAM_FORMAT = "delegate-debugger-program"
PROGRAM_VERSION = 1
PROGRAM_MEMBER = "program.json"
CONSTANTS_MEMBER = "constants.pt"


@dataclass(frozen=True)
class WrittenProgram:
    """What `Program.write` wrote: the file's sha256, its program.json text, and the weight file
    it refers to ({"file": name beside it, "sha256": pinned digest}), if any."""

    sha256: str
    document: str
    weights: dict[str, str] | None


class ProgramError(Exception):
    """A lowered program file that is missing, corrupt, of another version, or unsafe."""


@dataclass(frozen=True)
class OperatorInstruction:
    """One ATen op call outside any delegate (an operator event at run time)."""

    instruction_id: int
    op: str
    args: list[Any]
    kwargs: dict[str, Any]
    outputs: list[ValueId]
    multi_output: bool
    debug_handle: DebugHandle
    name: str
    fault: dict[str, Any] | None = None


@dataclass(frozen=True)
class DelegateInstruction:
    """A call into a delegate backend with its processed bytes (a DELEGATE_CALL event)."""

    instruction_id: int
    partition_id: int
    backend: str
    blob_member: str
    compile_specs: dict[str, Any]
    inputs: list[ValueId]
    outputs: list[ValueId]


@dataclass(frozen=True)
class CondInstruction:
    """torch.cond: run one of two sub-programs on the operands."""

    instruction_id: int
    debug_handle: DebugHandle
    predicate: ValueId
    operands: list[ValueId]
    true_branch: SubProgram
    false_branch: SubProgram
    outputs: list[ValueId]
    name: str = "cond"
    fault: dict[str, Any] | None = None  # applied to the cond's outputs (debugger tests)


Instruction = OperatorInstruction | DelegateInstruction | CondInstruction


@dataclass(frozen=True)
class SubProgram:
    """A value space, its inputs, instructions and output templates (a method or a branch)."""

    num_values: int
    inputs: list[ValueId]
    instructions: list[Instruction]
    outputs: list[Any]


@dataclass
class Program:
    """A loaded (or about to be saved) lowered program."""

    main: SubProgram
    constants: dict[str, ValueId]
    constant_tensors: dict[str, torch.Tensor]
    delegate_blobs: dict[str, bytes]
    metadata: dict[str, Any] = field(default_factory=dict)
    # Program-wide named data the delegates' bytes refer to by key (merged across partitions).
    named_data: dict[str, NamedData] = field(default_factory=dict)

    def write(self, path: Path, weights: WeightFile | None = None) -> WrittenProgram:
        """Write atomically; the file's sha256, program.json and pinned weight file. With
        `weights` (the exported program beside `path`), store their bytes by reference instead
        of again."""
        path = Path(path)
        document = {
            "format": PROGRAM_FORMAT,
            "version": PROGRAM_VERSION,
            "metadata": self.metadata,
            "constants": self.constants,
            "main": _encode_sub(self.main),
        }
        constants = io.BytesIO()
        torch.save(dict(self.constant_tensors), constants)
        payload = {CONSTANTS_MEMBER: constants.getvalue(), **self.delegate_blobs}
        named = {member_name(k): e.data for k, e in self.named_data.items()}
        manifest = None
        if weights is not None:
            payload, manifest = share_program(payload, named, weights)
        members: dict[str, bytes | memoryview] = dict(payload)
        members.update({k: byte_view(v) for k, v in named.items() if k not in members})
        text = json.dumps(document)
        with atomic_path(path) as tmp, DigestingFile(tmp) as file:
            with ReproducibleZipFile(file, "w", compression=zipfile.ZIP_STORED) as archive:
                archive.writestr(PROGRAM_MEMBER, text)
                if manifest is not None and manifest["members"]:
                    archive.writestr(EXTERNAL_MEMBER, json.dumps(manifest))
                if self.named_data:
                    archive.writestr(NAMED_DATA_INDEX, json.dumps(index_document(self.named_data)))
                for member, data in sorted(members.items(), key=_member_order):
                    archive.writestr(member, data)
            digest = file.sha256()
            declare_digest(tmp, digest)  # atomic_path keeps it: the file is not read back
        pinned = (
            {"file": manifest["file"], "sha256": manifest["sha256"]}
            if manifest is not None and manifest["members"]
            else None
        )
        return WrittenProgram(digest, text, pinned)


def _member_order(item: tuple[str, Any]) -> tuple[int, str]:
    """Constants and delegate blobs first (in their order), then named data by key."""
    return (1, item[0]) if item[0].startswith(NAMED_DATA_DIR) else (0, "")


def _encode_instruction(instr: Instruction) -> dict[str, Any]:
    if isinstance(instr, OperatorInstruction):
        return {"kind": "operator", **{k: getattr(instr, k) for k in instr.__dataclass_fields__}}
    if isinstance(instr, DelegateInstruction):
        return {"kind": "delegate", **{k: getattr(instr, k) for k in instr.__dataclass_fields__}}
    return {
        "kind": "cond",
        "instruction_id": instr.instruction_id,
        "debug_handle": instr.debug_handle,
        "predicate": instr.predicate,
        "operands": instr.operands,
        "true_branch": _encode_sub(instr.true_branch),
        "false_branch": _encode_sub(instr.false_branch),
        "outputs": instr.outputs,
        "name": instr.name,
        "fault": instr.fault,
    }


def _encode_sub(sub: SubProgram) -> dict[str, Any]:
    return {
        "num_values": sub.num_values,
        "inputs": sub.inputs,
        "instructions": [_encode_instruction(i) for i in sub.instructions],
        "outputs": sub.outputs,
    }


def _decode_instruction(data: dict[str, Any]) -> Instruction:
    kind = data["kind"]
    if kind == "operator":
        resolve_op(str(data["op"]))  # refuse anything that is not an ATen op at load time
        return OperatorInstruction(
            instruction_id=int(data["instruction_id"]),
            op=str(data["op"]),
            args=[decode_arg(a) for a in data["args"]],
            kwargs={str(k): decode_arg(v) for k, v in data["kwargs"].items()},
            outputs=[int(v) for v in data["outputs"]],
            multi_output=bool(data["multi_output"]),
            debug_handle=int(data["debug_handle"]),
            name=str(data["name"]),
            fault=data.get("fault"),
        )
    if kind == "delegate":
        return DelegateInstruction(
            instruction_id=int(data["instruction_id"]),
            partition_id=int(data["partition_id"]),
            backend=str(data["backend"]),
            blob_member=str(data["blob_member"]),
            compile_specs=dict(data["compile_specs"]),
            inputs=[int(v) for v in data["inputs"]],
            outputs=[int(v) for v in data["outputs"]],
        )
    if kind == "cond":
        return CondInstruction(
            instruction_id=int(data["instruction_id"]),
            debug_handle=int(data["debug_handle"]),
            predicate=int(data["predicate"]),
            operands=[int(v) for v in data["operands"]],
            true_branch=_decode_sub(data["true_branch"]),
            false_branch=_decode_sub(data["false_branch"]),
            outputs=[int(v) for v in data["outputs"]],
            name=str(data.get("name", "cond")),
            fault=data.get("fault"),
        )
    raise ProgramError(f"unknown instruction kind {kind!r}")


def _decode_sub(data: dict[str, Any]) -> SubProgram:
    return SubProgram(
        num_values=int(data["num_values"]),
        inputs=[int(v) for v in data["inputs"]],
        instructions=[_decode_instruction(i) for i in data["instructions"]],
        outputs=[decode_arg(o) for o in data["outputs"]],
    )


def _payload_members(archive: BoundedZip, path: Path) -> dict[str, bytes]:
    """Constants, delegate blobs and named data, with any weights kept in the exported program
    spliced in."""
    members = {
        name: archive.read(name)
        for name in archive.names()
        if name == CONSTANTS_MEMBER
        or name.startswith("delegates/")
        or name.startswith(NAMED_DATA_DIR)
    }
    if CONSTANTS_MEMBER not in members:
        raise ProgramError(f"{path}: no {CONSTANTS_MEMBER} member; not a lowered program")
    if EXTERNAL_MEMBER not in archive.names():
        return members
    manifest = json.loads(archive.read(EXTERNAL_MEMBER).decode("utf-8"))
    if not isinstance(manifest, dict):
        raise ProgramError(f"{path}: {EXTERNAL_MEMBER} is not an object")
    return restore(members, manifest, weight_file_beside(path, manifest), str(path))


def program_from_document(
    document: str,
    constant_tensors: dict[str, torch.Tensor],
    delegate_blobs: dict[str, bytes],
    named_data: dict[str, NamedData],
    path: Path,
) -> Program:
    """The program whose program.json is `document`, with these constants, blobs and named data
    (what `write` wrote at `path`)."""
    main, constants, metadata = _decoded(json.loads(document), path)
    return Program(
        main=main,
        constants=constants,
        constant_tensors=dict(constant_tensors),
        delegate_blobs=dict(delegate_blobs),
        metadata=metadata,
        named_data=dict(named_data),
    )


def read_program(path: Path) -> Program:
    """Read and validate a lowered program from disk; every problem is a ProgramError naming the
    file (the stages load it through `stages.handover.lowered_program`)."""
    path = Path(path)
    try:
        archive = BoundedZip(path, str(path))
    except FileNotFoundError as exc:
        raise ProgramError(f"{path}: no such program file; run the lower stage first") from exc
    except (OSError, ZipLimitError) as exc:
        raise ProgramError(f"{path}: not a readable program (truncated or corrupt: {exc})") from exc
    with archive:
        try:
            document = json.loads(archive.read(PROGRAM_MEMBER).decode("utf-8"))
            _check_header(document, path)
            members = _payload_members(archive, path)
            tensors = load_tensors(members[CONSTANTS_MEMBER], f"{path} member {CONSTANTS_MEMBER}")
            if not isinstance(tensors, dict):
                raise ProgramError(f"{path}: {CONSTANTS_MEMBER} is not a name → tensor mapping")
            main, constants, metadata = _decoded(document, path)
            blobs = {name: data for name, data in members.items() if name.startswith("delegates/")}
            named = _named_data(archive, members, path)
        except ProgramError:
            raise
        except (UnsafePayloadError, SharedWeightsError, NamedDataError) as exc:
            raise ProgramError(str(exc)) from exc
        except _CORRUPT as exc:
            raise ProgramError(f"{path}: corrupt program ({type(exc).__name__}: {exc})") from exc
    return Program(
        main=main,
        constants=constants,
        constant_tensors=dict(tensors),
        delegate_blobs=blobs,
        metadata=metadata,
        named_data=named,
    )


def _named_data(archive: BoundedZip, members: dict[str, bytes], path: Path) -> dict[str, NamedData]:
    """The named data members, checked against `named_data.json` (none without it)."""
    if NAMED_DATA_INDEX not in archive.names():
        if any(name.startswith(NAMED_DATA_DIR) for name in members):
            raise ProgramError(f"{path}: named data members without {NAMED_DATA_INDEX}")
        return {}
    index = json.loads(archive.read(NAMED_DATA_INDEX).decode("utf-8"))
    return read_index(index, members, str(path))


# What a corrupt program.json or member raises while it is decoded.
_CORRUPT = (
    ZipLimitError,
    UnicodeDecodeError,
    RecursionError,
    AttributeError,
    EOFError,
    KeyError,
    TypeError,
    ValueError,
    OpEncodingError,
)


def _check_header(document: Any, path: Path) -> None:
    """program.json marks a lowered program of the version this tool reads."""
    if not isinstance(document, dict) or document.get("format") != PROGRAM_FORMAT:
        raise ProgramError(f"{path}: {PROGRAM_MEMBER} does not describe a lowered program")
    if document.get("version") != PROGRAM_VERSION:
        raise ProgramError(
            f"{path}: program version {document.get('version')!r} is not supported "
            f"(this tool reads version {PROGRAM_VERSION}); re-run the lower stage"
        )


def _decoded(document: Any, path: Path) -> tuple[SubProgram, dict[str, ValueId], dict[str, Any]]:
    """The main sub-program, constant value ids and metadata of a program.json document."""
    try:
        _check_header(document, path)
        main = _decode_sub(document["main"])
        constants = {str(k): int(v) for k, v in document["constants"].items()}
        return main, constants, dict(document.get("metadata", {}))
    except ProgramError:
        raise
    except _CORRUPT as exc:
        raise ProgramError(f"{path}: corrupt program ({type(exc).__name__}: {exc})") from exc
