"""The lower stage's ETRecord: export's files plus the delegate maps, written as a new file.

The lower stage never rewrites a file it read: the ETRecord is built from `exported.pt2`,
`inputs.pt` and `reference_outputs.pt` and saved as lower's own output. The program is stored
once: an ETRecord beside `exported.pt2` refers to it by sha256; `pipeline.tools.pack_etrecord`
makes a self-contained copy for sharing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from stages.formats.etrecord import DelegateMapRecord, ETRecord
from stages.formats.program import Program
from stages.handles.handle_info import collect_handle_info
from stages.handover.etrecord import save_etrecord
from stages.handover.samples import load_samples


def lowered_graph_text(lowered: Program) -> str:
    """One line per top-level instruction of the lowered program (the ETRecord's lowered graph)."""
    return "\n".join(
        f"{i.instruction_id}: {type(i).__name__} {getattr(i, 'name', '')}{getattr(i, 'backend', '')}"
        for i in lowered.main.instructions
    )


def write_etrecord(
    path: Path,
    *,
    program: torch.export.ExportedProgram,
    program_bytes: bytes | None,
    program_sha256: str,
    program_path: Path,
    inputs: Path,
    reference_outputs: Path,
    model_name: str,
    lowered: Program,
    delegate_maps: list[DelegateMapRecord],
    lowering_info: dict[str, Any],
) -> ETRecord:
    """Assemble the ETRecord and save it atomically at `path`.

    A program beside `path` is referred to by name and hash; one elsewhere is embedded.
    `program_sha256` is the sha256 of the program file, computed once by the caller;
    `program_bytes` its bytes, or None when they were not read (read here only to embed them).
    """
    beside = Path(program_path).resolve().parent == Path(path).resolve().parent
    record = ETRecord(
        reference_program_bytes=program_bytes,
        representative_inputs=load_samples(inputs),
        reference_outputs=load_samples(reference_outputs),
        handles=collect_handle_info(program),
        model_name=model_name,
        lowered_graph=lowered_graph_text(lowered),
        delegate_maps=delegate_maps,
        lowering_info=lowering_info,
        program_file=Path(program_path).name if beside else None,
        program_sha256=program_sha256,
        program_source=Path(program_path),
    )
    save_etrecord(record, path)
    return record
