"""The delegates' processed bytes an ExecuTorch ETRecord carries, where it carries them.

An ETRecord's edge program (member `edge_dialect_exported_program[/METHOD]`) is a serialized
graph; when it was recorded after lowering, each `executorch_call_delegate` node's first
argument is a string holding the lowered module as JSON (`backend_id`, base64
`processed_bytes`, ...). ExecuTorch 1.5.1's `to_edge_transform_and_lower(...,
generate_etrecord=True)` records the edge program before lowering, so there are none and the
`.pte` is needed instead (`executorch_delegates`). Read only from an archive that
`verify_executorch_etrecord` accepted.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from stages.formats.etrecord_types import ETRecordError
from stages.safe_io.bounded_zip import BoundedZip

EDGE_PROGRAM = "edge_dialect_exported_program"
CALL_DELEGATE = "executorch_call_delegate"


@dataclass(frozen=True)
class LoweredModule:
    """One delegate call of the edge program, in graph order: its backend and payload."""

    backend_id: str
    processed: bytes


def lowered_modules(archive: BoundedZip, what: str, method: str = "forward") -> list[LoweredModule]:
    """Lowered modules of `method`'s edge program in graph order; [] when it has none."""
    names = archive.names()
    member = next((n for n in (f"{EDGE_PROGRAM}/{method}", EDGE_PROGRAM) if n in names), None)
    if member is None:
        return []
    try:
        document = json.loads(archive.read(member).decode("utf-8"))
        nodes = document["graph_module"]["graph"]["nodes"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ETRecordError(f"{what} member {member}: not a serialized edge program") from exc
    found: list[LoweredModule] = []
    for node in nodes if isinstance(nodes, list) else []:
        if isinstance(node, dict) and CALL_DELEGATE in str(node.get("target", "")):
            found.append(_lowered(node, f"{what} member {member} node {node.get('name')!r}"))
    return found


def _lowered(node: dict[str, Any], where: str) -> LoweredModule:
    try:
        text = node["inputs"][0]["arg"]["as_string"]
        module = json.loads(text)
        return LoweredModule(
            str(module["backend_id"]),
            base64.b64decode(module["processed_bytes"], validate=True),
        )
    except (KeyError, IndexError, TypeError, ValueError, binascii.Error) as exc:
        raise ETRecordError(f"{where}: lowered module without backend_id/processed_bytes") from exc
