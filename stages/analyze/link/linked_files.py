"""The analysis's files loaded and linked: the program index (recovered XNNPACK links
included), program identity, the delegate map check, and event rows per method."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch.export import ExportedProgram

from stages.analyze.config import AnalyzeConfig
from stages.analyze.link.event_table import build_event_rows
from stages.analyze.link.input_warnings import input_warnings
from stages.analyze.link.linking import ProgramIndex, check_same_program
from stages.analyze.link.map_check import (
    MapCheck,
    check_runtime_maps,
    log_findings,
)
from stages.analyze.link.metadata_parsers import resolve_parser
from stages.analyze.link.methods import (
    MethodPart,
    absent_method_warning,
    analysed_method_absent,
    method_parts,
    unanalysed_warning,
)
from stages.analyze.link.program_identity import (
    UNPROVEN,
    AnalysedFiles,
    check_logged_outputs,
    prove_identity,
)
from stages.analyze.link.view_links import with_view_instructions
from stages.analyze.link.xnnpack.graphs import load_xnnpack_graphs
from stages.analyze.link.xnnpack.recovery import (
    RecoveryReport,
    needs_recovery,
    recover_links,
)
from stages.analyze.load.loading import AnalysisInputs, load_inputs
from stages.handover.etrecord import etrecord_program


@dataclass(frozen=True)
class Linked:
    """The loaded files, the program index linking them, and what was proven about them."""

    inputs: AnalysisInputs
    index: ProgramIndex
    identity: Any
    program: ExportedProgram | None
    parser: Any
    map_check: MapCheck = field(default_factory=MapCheck)
    recovery: RecoveryReport | None = None
    methods: list[MethodPart] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def recover(
    index: ProgramIndex, inputs: AnalysisInputs, etrecord: Path | None, pte: Path | None
) -> tuple[ProgramIndex, RecoveryReport | None]:
    """XNNPACK kernel links from the serialized graphs, for calls whose delegate left no map."""
    wanted = needs_recovery(index)
    if not wanted:
        return index, None
    graphs, source = load_xnnpack_graphs(index, etrecord, pte, wanted)
    record = inputs.etrecord
    program = etrecord_program(record) if record is not None and graphs else None
    return recover_links(index, inputs.etdump, graphs, source, program)


def load_and_link(
    cfg: AnalyzeConfig,
    etdump: Path,
    debug_buffer: Path | None,
    etrecord: Path | None,
    pte: Path | None = None,
) -> Linked:
    """Load the files, refuse a foreign pairing, and prove (or check) program identity."""
    program_path = Path(cfg.exported_program).expanduser() if cfg.exported_program else None
    inputs = load_inputs(etdump, debug_buffer, etrecord, cfg.method, program_path)
    record = inputs.etrecord
    index = ProgramIndex.from_etrecord(record) if record is not None else ProgramIndex.empty()
    index = with_view_instructions(index, record, pte)
    info = record.lowering_info if record is not None else {}
    method = str(info.get("method", "")) if record is not None else ""
    methods = [str(m) for m in info.get("methods", [])]
    parts = method_parts(inputs.etdump, index, method, methods)
    warnings = unanalysed_warning(parts, method, methods)
    warnings += input_warnings(inputs.etdump, index, str(etdump), str(etrecord), record is not None)
    if index.linked and analysed_method_absent(parts, index, methods):
        warnings.append(absent_method_warning(str(etrecord), method, methods, len(parts)))
        parts = [MethodPart(f"method {i + 1}", p.dump, True) for i, p in enumerate(parts)]
        index = ProgramIndex.empty()
    if index.linked:  # link, prove and compare the ETRecord's method only
        inputs = replace(inputs, etdump=next(p.dump for p in parts if p.analysed))
    check_same_program(inputs.etdump, index, str(etdump), str(etrecord))
    delegates_own = index
    index, recovery = recover(index, inputs, etrecord, pte)
    files = AnalysedFiles(str(etdump), str(etrecord), str(debug_buffer))
    identity = prove_identity(inputs.etdump, inputs.debug_buffer, index, files, record is not None)
    program = None
    if identity.status == UNPROVEN and record is not None:  # check what can be checked
        program = etrecord_program(record)
        identity = check_logged_outputs(identity, inputs.etdump, index, program)
    parser = resolve_parser(
        cfg.delegate_metadata_parser,
        index.backend,
        record.lowering_info.get("backend_target") if record is not None else None,
    )
    # The map check judges the delegates' own maps, never the analysis's recovered ones.
    map_check = check_runtime_maps(inputs.etdump, delegates_own, record)
    log_findings(map_check)
    return Linked(inputs, index, identity, program, parser, map_check, recovery, parts, warnings)


def method_event_rows(linked: Linked, time_unit: str, exact_samples: int) -> list[Any]:
    """Event rows per method (instruction ids overlap across methods), the analysed method's
    first; only the method the ETRecord describes is linked through it."""
    return [
        row
        for part in sorted(linked.methods, key=lambda p: not p.analysed)  # analysed first
        for row in build_event_rows(
            part.dump,
            linked.index if part.analysed else ProgramIndex.empty(),
            linked.parser,
            time_unit,
            part.name,
            exact_samples,
        )
    ]
