"""ExecuTorch's view instructions from the `.pte`, so their events link to no op (not a mismatch)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from stages.analyze.link.linking import ProgramIndex
from stages.analyze.load.loading import AnalyzeInputError
from stages.formats.etrecord import ETRecord
from stages.formats.executorch.delegates import ExecuTorchProgramError
from stages.formats.executorch.views import read_view_instructions


def with_view_instructions(
    index: ProgramIndex, record: ETRecord | None, pte: Path | None
) -> ProgramIndex:
    """`index` knowing the `.pte`'s `et_view` instructions, for ExecuTorch's ETRecord (whose
    debug-handle map leaves them out); unchanged without a `.pte` or for our own ETRecord."""
    if record is None or pte is None or not pte.is_file() or not index.linked:
        return index
    if not record.lowering_info.get("source_format"):
        return index
    method = str(record.lowering_info.get("method") or "forward")
    try:
        views = read_view_instructions(pte.read_bytes(), f"analyze.pte={pte}", method)
    except ExecuTorchProgramError as exc:
        raise AnalyzeInputError(f"{exc}; pass the .pte this ETRecord was made with") from exc
    return replace(index, view_instructions=views) if views else index
