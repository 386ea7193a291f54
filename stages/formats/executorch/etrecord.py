"""ExecuTorch's ETRecord (`etrecord.bin`) checked before any parser reads it.

ExecuTorch 1.5 writes a zip: the empty marker `ETRECORD_V0`; JSON members (`debug_handle_map`,
`delegate_map`, `instruction_id_to_num_outs_map`, `export_graph_id`); torch.save members
(`reference_outputs`, `representative_inputs`); and per recorded program `<name>` (serialized
graph JSON) with `<name>_state_dict`, `<name>_constants`, `<name>_example_inputs` (torch.save
bytes, possibly empty). ExecuTorch's parser falls back to weights_only=False for those three and
evaluates shape expressions; a lowered delegate nests a program JSON, with base64 torch.save
bytes, inside a string argument. `verify_executorch_etrecord` is the single entry point any
reader of this format calls first: it refuses every pickle payload and unknown member.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from stages.formats.pt2_archive import check_graph_json
from stages.safe_io.bounded_zip import BoundedZip
from stages.safe_io.tensor_file import UnsafePayloadError, load_tensors

IDENTIFIER = "ETRECORD_V0"
_JSON_MEMBERS = ("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map")
_TENSOR_MEMBERS = ("reference_outputs", "representative_inputs")
_ARTIFACT_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
_EDGE_TARGETS = re.compile(
    r"executorch\.exir\.dialects\.(edge|backend)\.ops\.[A-Za-z_][A-Za-z0-9_]*"
    r"\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?|executorch\.exir\.memory\.view|memory\.alloc"
)
_MAX_NESTING = 8


def is_executorch_etrecord(names: list[str]) -> bool:
    """ExecuTorch's ETRecord carries the marker member `ETRECORD_V0`."""
    return IDENTIFIER in names


def verify_executorch_etrecord(archive: BoundedZip, what: str) -> None:
    """Refuse the file unless every member is JSON, a checked graph or weights-only tensors."""
    names = archive.names()
    programs = {
        name
        for name in names
        if name not in (IDENTIFIER, "export_graph_id", *_JSON_MEMBERS, *_TENSOR_MEMBERS)
        and not name.endswith(_ARTIFACT_SUFFIXES)
    }
    for name in names:
        where = f"{what} member {name}"
        if name == IDENTIFIER:
            if archive.member_size(name) != 0:
                raise UnsafePayloadError(f"{where} should be an empty marker")
        elif name in (*_JSON_MEMBERS, "export_graph_id"):
            _json(archive.read(name), where)
        elif name in _TENSOR_MEMBERS:
            load_tensors(archive.read(name), where)
        elif name in programs:
            _check_program_json(_json(archive.read(name), where), where, depth=0)
        elif name.removesuffix(_suffix(name)) in programs:
            data = archive.read(name)
            if data:
                load_tensors(data, where)
        else:
            raise UnsafePayloadError(f"{where} belongs to no recorded program; refused")


def _suffix(name: str) -> str:
    return next((s for s in _ARTIFACT_SUFFIXES if name.endswith(s)), "")


def _check_program_json(document: Any, where: str, depth: int) -> None:
    """A serialized program, and every lowered module nested in it, down to its tensors."""
    if depth > _MAX_NESTING:
        raise UnsafePayloadError(f"{where}: lowered modules nested too deep; refused")
    for text in check_graph_json(document, where, extra_targets=_EDGE_TARGETS):
        nested = _json(text.encode(), f"{where} (nested lowered module)")
        if not isinstance(nested, dict) or "original_module" not in nested:
            continue
        _check_program_json(nested["original_module"], f"{where} (lowered module)", depth + 1)
        for key in ("original_state_dict", "original_constants"):
            blob = nested.get(key) or ""
            try:
                data = base64.b64decode(blob, validate=True)
            except (binascii.Error, TypeError, ValueError) as exc:
                raise UnsafePayloadError(f"{where}: lowered module {key} is not base64") from exc
            if data:
                load_tensors(data, f"{where} (lowered module {key})")


def _json(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        kind = "a pickle" if raw[:1] == b"\x80" else "not JSON"
        raise UnsafePayloadError(f"{where} is {kind}; refused") from exc
