"""The numeric gap of one analysis (or why there is none), the inputs note, and the warnings
about an injected fault in a cond branch never run."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from torch.export import ExportedProgram

from stages.analyze.compare.exact_compare import tie_tolerance
from stages.analyze.compare.expected_error import qparams_from
from stages.analyze.compare.gap.rows import GapRow
from stages.analyze.compare.input_mismatch import every_output_differs, inputs_note
from stages.analyze.compare.numeric_gap import numeric_gap_and_flow
from stages.analyze.compare.runtime_outputs import runtime_outputs
from stages.analyze.link.control_flow import CondRecord, cond_sites, untaken_fault_warnings
from stages.analyze.link.linking import ProgramIndex
from stages.analyze.link.map_check import (
    MapCheck,
)
from stages.analyze.link.node_names import fault_node_names
from stages.analyze.load.calibration_samples import calibration_samples
from stages.analyze.load.loading import AnalysisInputs
from stages.analyze.load.unused_inputs import NotEvaluated, gap_blocker, no_outputs
from stages.formats.etdump.streaming import holds_debug_events
from stages.handover.etrecord import etrecord_program

ACCURACY_SCOPE = NotEvaluated(
    "numeric_gap",
    "analyze.scope",
    "analyze.scope=accuracy: end-to-end accuracy only, no per-op gaps (analyze.scope=full "
    "for them)",
    True,
)


@dataclass(frozen=True)
class Gaps:
    """Gap rows and cond records (or why there are none), the inputs note, and per handle the
    node names `backend.fault.node` takes."""

    rows: list[GapRow]
    flows: list[CondRecord]
    not_evaluated: NotEvaluated | None
    inputs_note: str = ""
    node_names: dict[int, list[str]] = field(default_factory=dict)


def evaluate_numeric_gap(
    inputs: AnalysisInputs,
    index: ProgramIndex,
    comparators: list[Any],
    program: ExportedProgram | None,
    map_check: MapCheck | None = None,
    floor_units: float = 0.0,
    samples: list[Any] | None = None,
    accuracy_only: bool = False,
) -> Gaps:
    """Gap rows and cond records, or none and why they cannot be computed; and a note when every
    input-dependent output differs (the run's inputs may not be the ETRecord's)."""
    if accuracy_only:
        return Gaps([], [], ACCURACY_SCOPE)
    blocker = gap_blocker(inputs)
    record, buffer = inputs.etrecord, inputs.debug_buffer
    if blocker is not None or record is None or buffer is None:
        return Gaps([], [], blocker)
    logged = replace(inputs.etdump, run_data=[*filter(holds_debug_events, inputs.etdump.run_data)])
    outputs = runtime_outputs(
        logged, buffer.payload, index, str(inputs.debug_buffer_path), map_check
    )
    program = program or etrecord_program(record)
    names = fault_node_names(program.graph_module)
    if not outputs:
        return Gaps([], [], no_outputs(inputs), node_names=names)
    groups, rows, flows = numeric_gap_and_flow(
        outputs,
        program,
        record.representative_inputs if samples is None else samples,  # a generation's step
        comparators,
        tie_tolerance(index.precision),
        index.precision,
        floor_units,
        # what the lower stage calibrated on: calibration_inputs.pt, or the evaluation samples
        calibration=calibration_samples(inputs.etrecord_path, record.representative_inputs),
        qparams=qparams_from(record.lowering_info),
        delegated={h for m in index.maps for h in m.delegated_handles},
    )
    differ, compared = every_output_differs(rows, groups, program)
    note = inputs_note(differ, compared, str(inputs.etrecord_path))
    if map_check is not None and map_check.explains_divergence():
        note = ""  # a map or logging error explains differing outputs better than the inputs
    return Gaps(rows, flows, None, note, names)


def fault_warnings(
    record: Any, flows: list[CondRecord], program: ExportedProgram | None
) -> list[str]:
    """The lower stage's warnings about the injected fault, and a fault in a branch never run."""
    fault = record.lowering_info.get("fault_injected") if record is not None else None
    if not isinstance(fault, dict):
        return []
    warnings = [str(w) for w in fault.get("warnings", [])]
    if flows:
        gm = (program or etrecord_program(record)).graph_module
        warnings += untaken_fault_warnings(cond_sites(gm), flows, fault)
    return warnings
