"""The lower stage: exported program + backend config → lowered_program.zip, lowering.json, ETRecord.

It reads export's files and writes only new ones (the ETRecord included).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.backends.backend_api import (
    BackendDetails,
    PartitionGraph,
    PreprocessResult,
    backend_class,
)
from stages.backends.delegate_map_findings import (
    ERROR,
    MAP_CHECK_KEY,
    MapFinding,
    summary_line,
)
from stages.backends.fault_injection import FAULT_KINDS, fault_hits
from stages.closed_sets import ObserveMode
from stages.export.reference_capture import capture_node_outputs
from stages.formats.artifacts import ArtifactName
from stages.formats.etrecord import DelegateMapRecord
from stages.formats.executorch.program import is_executorch_backend
from stages.formats.generation_signature import ETRECORD_KEY as GENERATION_KEY
from stages.formats.generation_signature import load_signature
from stages.formats.inputs_record import calibration_file
from stages.formats.program import (
    CondInstruction,
    DelegateInstruction,
    OperatorInstruction,
    Program,
    SubProgram,
)
from stages.formats.shared_weights import weight_file, weight_file_read_lazily
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handles.graph_handles import iter_operator_nodes
from stages.handover.exported_program import holds_exported_program, load_exported_program
from stages.handover.held_weights import held_weight_file
from stages.handover.lowered_program import save_program
from stages.handover.samples import load_samples
from stages.lower.config import BackendConfig
from stages.lower.etrecord_writer import write_etrecord
from stages.lower.executorch.lowering import lower_with_executorch
from stages.lower.fault_target import (
    AmbiguousFaultTargetError,
    no_op_warnings,
    operator_nodes,
    resolve_fault_node,
    targets,
)
from stages.lower.map_check import MapShapeError, check_maps
from stages.lower.op_overrides import OpOverrides, UnknownOpError, resolve_overrides
from stages.lower.partitioner import (
    PartitionResult,
    constant_tensors,
    partition_graph,
    partition_program,
    summarize_rejections,
)
from stages.lower.program_builder import build_program
from stages.safe_io.file_digests import known_sha256, read_with_sha256
from stages.safe_io.json_text import write_json_atomic

log = logging.getLogger(__name__)


class LoweringError(Exception):
    """The backend config cannot be applied to this program; the message names the option
    (`failed_option`, when one option is wrong: a resume command leaves it out)."""

    def __init__(self, message: str, failed_option: str | None = None) -> None:
        super().__init__(message)
        self.failed_option = failed_option


@dataclass(frozen=True)
class LowerArtifacts:
    """Files the lower stage wrote, plus its metrics."""

    program: Path
    lowering_report: Path
    etrecord: Path
    metrics: dict[str, float] = field(default_factory=dict)
    # runtime.observe=tap on executorch_*: the instrumented program and taps.json.
    tap_files: tuple[Path, ...] = ()


def _fault(cfg: BackendConfig, program: torch.export.ExportedProgram) -> dict[str, Any] | None:
    fault = cfg.fault
    if not fault.node and fault.debug_handle is None:
        return None
    if fault.kind not in FAULT_KINDS:
        raise LoweringError(
            f"backend.fault.kind={fault.kind!r}: choose one of {FAULT_KINDS}", "backend.fault.kind"
        )
    nodes = list(iter_operator_nodes(program.graph_module))
    qualified = {n.qualified for n in operator_nodes(program.graph_module)}
    if fault.node and not any(n.name == fault.node for n in nodes) and fault.node not in qualified:
        names = ", ".join(n.name for n in nodes[:12])
        raise LoweringError(
            f"backend.fault.node={fault.node!r} is not a node of the exported program (e.g. {names}, ...)",
            "backend.fault.node",
        )
    handles = {n.meta[DEBUG_HANDLE_META] for n in nodes}
    if fault.debug_handle is not None and fault.debug_handle not in handles:
        raise LoweringError(
            f"backend.fault.debug_handle={fault.debug_handle} does not exist (handles 1..{max(handles)})",
            "backend.fault.debug_handle",
        )
    requested = {
        "node": fault.node,
        "debug_handle": fault.debug_handle,
        "kind": fault.kind,
        "value": fault.value,
        **({"from_step": fault.from_step} if fault.from_step else {}),
    }
    try:
        resolved = resolve_fault_node(program.graph_module, requested)
    except AmbiguousFaultTargetError as exc:
        raise LoweringError(str(exc), "backend.fault.node") from exc
    warnings = no_op_warnings(program.graph_module, resolved)
    for warning in warnings:
        log.warning("[lower] %s", warning)
    return {**resolved, "warnings": warnings} if warnings else resolved


def _unless_kept_off(
    fault: dict[str, Any] | None, backend: BackendConfig, program: ExportedProgram
) -> dict[str, Any] | None:
    """No fault when `backend.keep_off` takes every op it targets: a fault emulates a wrong
    delegate kernel, and a kept-off op runs the portable runtime's kernel instead."""
    if fault is None or not backend.keep_off:
        return fault
    kept = _overrides(backend, program).keep_off
    hit = targets(program.graph_module, fault)
    if hit and all(not t.graph and t.node.name in kept for t in hit):
        log.warning(
            "[lower] backend.fault targets %s, which backend.keep_off keeps off the delegate: "
            "the portable kernel that runs it is not faulted",
            ", ".join(t.qualified for t in hit),
        )
        return None
    return fault


def _applied_fault(
    fault: dict[str, Any] | None, parts: _Partitioned, backend: BackendConfig
) -> dict[str, Any] | None:
    """The fault as applied: by the program builder on an operator call, or by the backend on a
    delegated kernel; a backend that took a delegated target without applying it is an error."""
    if fault is None:
        return None
    delegated = [n for nodes in parts.result.partitions for n in nodes]
    if fault_hits(fault, delegated) is None or parts.instance.faulted_nodes:
        return fault
    target = fault.get("qualified_node") or fault.get("node") or f"handle {fault['debug_handle']}"
    raise LoweringError(
        f"backend.fault targets {target}, which backend '{parts.instance.name}' "
        f"({backend._target_}) delegated, but its preprocess never took the fault: a backend with "
        "`applies_faults = True` calls `self.fault_for(kernel_nodes)` for every kernel and "
        "applies what it returns (docs/delegate_authors.md#faults)"
    )


def _calibrate(program: torch.export.ExportedProgram, inputs: Path) -> dict[str, float]:
    """Max |value| per node output over the calibration samples (per-tensor int8 scales)."""
    ranges: dict[str, float] = {}
    for sample in load_samples(inputs):
        outputs, _ = capture_node_outputs(program, sample)
        for name, value in outputs.items():
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                finite = value.detach()[torch.isfinite(value)]
                if finite.numel():
                    ranges[name] = max(ranges.get(name, 0.0), float(finite.abs().max()))
    user_inputs = [
        spec.arg.name
        for spec in program.graph_signature.input_specs
        if spec.kind.name == "USER_INPUT"
    ]
    for sample in load_samples(inputs):
        for name, tensor in zip(user_inputs, sample, strict=False):
            if tensor.is_floating_point():
                ranges[name] = max(ranges.get(name, 0.0), float(tensor.abs().max()))
    return ranges


def instruction_debug_handles(sub: SubProgram) -> dict[str, int]:
    """Instruction id → debug handle of every operator call (cond branches included)."""
    found: dict[str, int] = {}
    for instr in sub.instructions:
        if isinstance(instr, OperatorInstruction | CondInstruction):
            found[str(instr.instruction_id)] = instr.debug_handle
        if isinstance(instr, CondInstruction):
            found |= instruction_debug_handles(instr.true_branch)
            found |= instruction_debug_handles(instr.false_branch)
    return found


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_json_atomic(path, data, indent=2, default=str)


def _same_file(a: Path, b: Path) -> bool:
    return b.is_file() and a.resolve() == b.resolve()


@dataclass(frozen=True)
class _Partitioned:
    """The exported program cut into partitions, each preprocessed by the backend."""

    instance: BackendDetails
    result: PartitionResult
    constants: dict[str, torch.Tensor]
    graphs: list[PartitionGraph]
    preprocessed: dict[int, PreprocessResult]
    specs: dict[str, Any]
    map_findings: list[MapFinding] = field(default_factory=list)
    overrides: OpOverrides = field(default_factory=OpOverrides)


def _check_maps(
    backend: BackendConfig,
    graphs: list[PartitionGraph],
    preprocessed: dict[int, PreprocessResult],
) -> list[MapFinding]:
    """The map check of every partition, logged in one line (details in lowering.json)."""
    maps = {pid: result.debug_handle_map for pid, result in preprocessed.items()}
    try:
        findings = check_maps(backend.name, graphs, maps)
    except MapShapeError as exc:
        raise LoweringError(f"{exc} (backend._target_={backend._target_})") from exc
    if findings:
        level = logging.ERROR if any(f.severity == ERROR for f in findings) else logging.WARNING
        log.log(
            level,
            "[lower] delegate map check: %s; details in %s",
            summary_line(findings),
            ArtifactName.LOWERING_REPORT,
        )
    return findings


def _overrides(backend: BackendConfig, program: ExportedProgram) -> OpOverrides:
    """`backend.keep_float` / `backend.keep_off` as node names (LoweringError for an unknown op)."""
    try:
        return resolve_overrides(
            program.graph_module, list(backend.keep_float), list(backend.keep_off)
        )
    except UnknownOpError as exc:
        raise LoweringError(str(exc)) from exc


def _partition(
    backend: BackendConfig, program: ExportedProgram, inputs: Path, fault: dict[str, Any] | None
) -> _Partitioned:
    """Tag supported nodes, group them into partitions and run the backend's preprocess on each."""
    cls = backend_class(backend.name, backend._target_)
    instance: BackendDetails = cls(backend.precision, fault)
    overrides = _overrides(backend, program)
    if overrides.keep_float and not cls.honours_keep_float:
        raise LoweringError(
            f"backend.keep_float: backend '{backend.name}' does not compute ops at fp32 on "
            "request (its class leaves `honours_keep_float` False); drop backend.keep_float"
        )
    result = partition_program(program, instance, overrides.keep_off)
    constants = constant_tensors(program)
    calibration = (
        _calibrate(program, inputs) if backend.precision == "int8" and result.partitions else {}
    )
    graphs = [
        partition_graph(i, nodes, constants, calibration, overrides.keep_float)
        for i, nodes in enumerate(result.partitions)
    ]
    specs = dict(backend.compile_specs)
    preprocessed = {g.partition_id: instance.preprocess(g, specs) for g in graphs}
    findings = _check_maps(backend, graphs, preprocessed)
    return _Partitioned(
        instance, result, constants, graphs, preprocessed, specs, findings, overrides
    )


@dataclass(frozen=True)
class _ExportedFile:
    """exported.pt2 as the lower stage has it: path, sha256 (hashed once), and its bytes, or None
    when this process holds the program and the file was not read."""

    path: Path
    data: bytes | None
    sha256: str


@dataclass(frozen=True)
class _SavedProgram:
    """The lowered program as built and the file it was written to, with that file's sha256."""

    program: Program
    path: Path
    sha256: str


def _save_program(
    backend: BackendConfig,
    program: ExportedProgram,
    exported: _ExportedFile,
    parts: _Partitioned,
    fault: dict[str, Any] | None,
    run_dir: Path,
) -> _SavedProgram:
    """Build the lowered program and write it, its weights by reference to exported.pt2."""
    lowered = build_program(
        program,
        parts.graphs,
        parts.preprocessed,
        parts.constants,
        backend.name,
        parts.specs,
        fault,
        metadata={
            "backend": backend.name,
            "backend_target": backend._target_,
            "precision": backend.precision,
            "program_fingerprint": exported.sha256,
            "ticks_per_ms": parts.instance.ticks_per_ms,
            "timed_by_cost_model": parts.instance.timed_by_cost_model,
            "applies_faults": parts.instance.applies_faults,
        },
    )
    program_path = run_dir / ArtifactName.PROGRAM
    beside = run_dir / ArtifactName.EXPORTED_PROGRAM
    # Weights once: the program refers to exported.pt2's weights when it sits beside it.
    if not _same_file(exported.path, beside):
        return _SavedProgram(lowered, program_path, save_program(lowered, program_path, None))
    if exported.data is not None:
        shared = weight_file(exported.data, beside.name, str(beside), exported.sha256)
        return _SavedProgram(lowered, program_path, save_program(lowered, program_path, shared))
    held = held_weight_file(beside, exported.sha256)  # the held tensors are those bytes
    if held is not None:
        return _SavedProgram(lowered, program_path, save_program(lowered, program_path, held))
    with weight_file_read_lazily(beside, exported.sha256) as lazily:  # one member at a time
        return _SavedProgram(lowered, program_path, save_program(lowered, program_path, lazily))


def _delegate_maps(backend: BackendConfig, parts: _Partitioned) -> list[DelegateMapRecord]:
    """Per partition: the identifier → handles map its preprocess built, and the handles it took."""
    return [
        DelegateMapRecord(
            partition_id=g.partition_id,
            backend_name=backend.name,
            debug_handle_map=parts.preprocessed[g.partition_id].debug_handle_map,
            delegated_handles=tuple(sorted({int(n.meta[DEBUG_HANDLE_META]) for n in g.nodes})),
        )
        for g in parts.graphs
    ]


def _lowering_report(
    backend: BackendConfig,
    parts: _Partitioned,
    lowered: Program,
    fingerprints: tuple[str, str],
    fault: dict[str, Any] | None,
) -> dict[str, Any]:
    """lowering.json: partitions, instruction → handles, what was left out and why."""
    program_fingerprint, lowered_fingerprint = fingerprints
    return {
        "backend": backend.name,
        "backend_target": backend._target_,
        "precision": backend.precision,
        "ticks_per_ms": parts.instance.ticks_per_ms,
        "timed_by_cost_model": parts.instance.timed_by_cost_model,
        "applies_faults": parts.instance.applies_faults,
        "program_fingerprint": program_fingerprint,
        "lowered_program_fingerprint": lowered_fingerprint,
        "fault_injected": fault,
        "op_overrides": parts.overrides.record(),
        "partitions": [
            {
                "partition_id": g.partition_id,
                "ops": [n.name for n in g.nodes if "getitem" not in str(n.target)],
                "kernels": len(parts.preprocessed[g.partition_id].debug_handle_map),
            }
            for g in parts.graphs
        ],
        "delegate_instructions": {
            str(i.instruction_id): i.partition_id
            for i in lowered.main.instructions
            if isinstance(i, DelegateInstruction)
        },
        "instruction_debug_handles": instruction_debug_handles(lowered.main),
        "rejected_ops": [r.__dict__ for r in parts.result.rejected],
        MAP_CHECK_KEY: [f.record() for f in parts.map_findings],
    }


def _lower_metrics(
    program: ExportedProgram,
    parts: _Partitioned,
    maps: list[DelegateMapRecord],
    seconds: tuple[float, float],
    fault: dict[str, Any] | None,
) -> dict[str, float]:
    """Delegation counts and ratios, kernel counts, and the stage's two timings."""
    all_nodes = [
        n for n in iter_operator_nodes(program.graph_module) if "getitem" not in str(n.target)
    ]
    delegated = [
        n for nodes in parts.result.partitions for n in nodes if "getitem" not in str(n.target)
    ]
    lowering_seconds, load_seconds = seconds
    return {
        "partitions": float(len(parts.graphs)),
        "delegated_ops": float(len(delegated)),
        "non_delegated_ops": float(len(all_nodes) - len(delegated)),
        "delegated_op_ratio": len(delegated) / max(len(all_nodes), 1),
        "kernels": float(sum(len(m.debug_handle_map) for m in maps)),
        "fused_kernels": float(
            sum(1 for m in maps for handles in m.debug_handle_map.values() if len(handles) > 1)
        ),
        "rejected_ops": float(len(parts.result.rejected)),
        "lowering_seconds": lowering_seconds,
        "load_exported_seconds": load_seconds,
        "fault_injected": 1.0 if fault else 0.0,
        "delegate_map_errors": float(sum(f.severity == ERROR for f in parts.map_findings)),
        "delegate_map_warnings": float(sum(f.severity != ERROR for f in parts.map_findings)),
    }


def _exported_program(path: Path) -> tuple[ExportedProgram, _ExportedFile]:
    """The program to lower: the one this process holds for that file (nothing read: a
    billion-parameter program is gigabytes), else read, hashed once and loaded."""
    known = known_sha256(path)
    if known is not None and holds_exported_program(known):
        return load_exported_program(path), _ExportedFile(path, None, known)
    data, sha256 = read_with_sha256(path)
    return load_exported_program(data, str(path), sha256), _ExportedFile(path, data, sha256)


def _generation_info(generation: Path | None) -> dict[str, Any]:
    """The ETRecord's record of a generation program's signature (none for a plain program)."""
    if generation is None:
        return {}
    return {GENERATION_KEY: load_signature(generation).record()}


def run_lower(
    backend: BackendConfig,
    exported_program: Path,
    inputs: Path,
    reference_outputs: Path,
    run_dir: Path,
    model_name: str = "",
    generation: Path | None = None,
    observe: str = ObserveMode.off,
) -> LowerArtifacts:
    """Partition, preprocess each partition, write the program and the complete ETRecord (with
    `generation`, generation.json's signature in its lowering info); int8 calibrates on
    calibration_inputs.pt beside `inputs` when the export wrote one (`calibration_file`)."""
    if is_executorch_backend(backend.name):  # ExecuTorch lowers: the real .pte and its ETRecord
        pte, lowering_json, et_record, metrics, taps = lower_with_executorch(
            backend, exported_program, inputs, run_dir, model_name, observe, generation
        )
        return LowerArtifacts(pte, lowering_json, et_record, metrics=metrics, tap_files=taps)
    load_started = time.perf_counter()
    program, exported = _exported_program(exported_program)
    load_seconds = time.perf_counter() - load_started
    started = time.perf_counter()
    requested = _unless_kept_off(_fault(backend, program), backend, program)
    parts = _partition(backend, program, calibration_file(inputs), requested)
    fault = _applied_fault(requested, parts, backend)
    saved = _save_program(backend, program, exported, parts, fault, run_dir)
    lowered, program_path = saved.program, saved.path
    lowering_seconds = time.perf_counter() - started
    # The run stage stamps the lowered program's hash into the ETDump so analysis can refuse a
    # foreign pairing.
    fingerprints = (exported.sha256, saved.sha256)
    maps = _delegate_maps(backend, parts)
    report = _lowering_report(backend, parts, lowered, fingerprints, fault)
    report_path = run_dir / ArtifactName.LOWERING_REPORT
    _write_json(report_path, report)
    if parts.result.rejected:
        log.info(
            "[lower] %s; the list is in %s",
            summarize_rejections(parts.result.rejected),
            report_path.name,
        )
    etrecord = run_dir / ArtifactName.ETRECORD
    write_etrecord(
        etrecord,
        program=program,
        program_bytes=exported.data,
        program_sha256=exported.sha256,
        program_path=exported_program,
        inputs=inputs,
        reference_outputs=reference_outputs,
        model_name=model_name,
        lowered=lowered,
        delegate_maps=maps,
        lowering_info={k: v for k, v in report.items() if k != "partitions"}
        | _generation_info(generation),
    )
    metrics = _lower_metrics(program, parts, maps, (lowering_seconds, load_seconds), fault)
    return LowerArtifacts(
        program=program_path, lowering_report=report_path, etrecord=etrecord, metrics=metrics
    )
