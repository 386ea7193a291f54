"""The analyze stage's one call for a generation: nothing for a plain run's ETRecord."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from torch.export import ExportedProgram

from stages.analyze.generation.analysis import (
    GenerationAnalysis,
    GenerationFiles,
    analyse_generation,
)
from stages.analyze.generation.step_gaps import GapOptions, single_step_dump
from stages.analyze.link.linking import ProgramIndex
from stages.analyze.link.map_check import MapCheck
from stages.analyze.link.node_names import fault_node_names
from stages.analyze.load.loading import AnalysisInputs
from stages.formats.generation_signature import ETRECORD_KEY, load_signature, signature_from
from stages.handover.etrecord import etrecord_program


def generation_analysis(
    inputs: AnalysisInputs,
    index: ProgramIndex,
    map_check: MapCheck | None,
    program: ExportedProgram | None,
    options: GapOptions,
    files: tuple[Path | None, Path | None],
) -> GenerationAnalysis | None:
    """The per-step analysis when the ETRecord (ours), or generation.json beside an ExecuTorch
    ETRecord, describes a generation program; else None. `files`: step_inputs.pt and
    generation.json when they exist."""
    step_inputs, generation = files
    record = inputs.etrecord
    info = record.lowering_info.get(ETRECORD_KEY) if record is not None else None
    if record is None or inputs.debug_buffer is None:
        return None
    if info is not None:
        signature = signature_from(info, f"{inputs.etrecord_path} ({ETRECORD_KEY})")
    elif generation is not None and record.lowering_info.get("source_format"):
        signature = load_signature(generation)  # ExecuTorch's ETRecord: export's record
    else:
        return None
    program = program or etrecord_program(record)
    found = GenerationFiles(
        inputs.etdump, inputs.debug_buffer.payload, str(inputs.debug_buffer_path), step_inputs
    )
    names = fault_node_names(program.graph_module)
    prompt = tuple(record.representative_inputs[0])
    return analyse_generation(signature, found, (index, map_check, names), program, prompt, options)


def focused_inputs(inputs: AnalysisInputs, analysis: GenerationAnalysis) -> AnalysisInputs:
    """The analysis inputs with only the focus step's capture block (the plain tables' step)."""
    if analysis.focus_block is None:
        return inputs
    return replace(inputs, etdump=single_step_dump(inputs.etdump, analysis.focus_block))
