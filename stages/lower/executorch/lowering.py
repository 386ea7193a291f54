"""Lowering with ExecuTorch itself (`executorch_*` backends): the real `.pte` and its ETRecord.

`to_edge_transform_and_lower` with the backend's partitioners (XNNPACK's, or none for the
portable operators), `to_executorch()`, and ExecuTorch's ETRecord with the representative inputs,
so the analysis reads it like any ExecuTorch user's. Needs the executorch extra.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any

from stages.closed_sets import ObserveMode, Precision
from stages.dotted_import import callable_target
from stages.formats.artifacts import ArtifactName
from stages.formats.executorch.program import executorch_precisions
from stages.formats.generation_signature import load_signature
from stages.formats.inputs_record import calibration_file
from stages.handover.exported_program import load_exported_program
from stages.handover.samples import load_samples
from stages.lower.config import BackendConfig
from stages.lower.executorch.delegated_ops import delegated_ops_by_partition
from stages.lower.executorch.fault import (
    ExecuTorchFaultError,
    fault_target_name,
    insert_fault,
    name_fault_ops,
)
from stages.lower.executorch.keep_off import keep_off_partitioner
from stages.lower.executorch.precision import (
    ExecuTorchPrecisionError,
    as_runtime_inputs,
    program_at_precision,
)
from stages.lower.executorch.tap import ExecuTorchTapError, lower_tapped
from stages.lower.executorch.weight_quantization import LeftInFloat
from stages.lower.op_overrides import op_names
from stages.safe_io.atomic_write import atomic_path
from stages.safe_io.json_text import write_json_atomic

log = logging.getLogger(__name__)

EXECUTORCH_EXTRA = "pip install -e '.[executorch]'"
METHOD = "forward"


class ExecuTorchLoweringError(Exception):
    """An executorch_* backend that cannot lower this program or config; names the option."""


def xnnpack_partitioners() -> list[Any]:
    """ExecuTorch's XNNPACK partitioner (backend `executorch_xnnpack`)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return [XnnpackPartitioner()]


def portable_partitioners() -> list[Any]:
    """No partitioner: every op runs as ExecuTorch's portable kernels (`executorch_portable`)."""
    return []


def _check_config(backend: BackendConfig) -> None:
    offered = executorch_precisions(backend.name)
    if str(backend.precision) not in offered:
        raise ExecuTorchLoweringError(
            f"backend.precision={backend.precision!s}: backend {backend.name} lowers "
            f"{', '.join(offered)} (use backend=xnnpack for the emulated precisions)"
        )
    if backend.compile_specs:
        raise ExecuTorchLoweringError(
            f"backend.compile_specs: backend {backend.name} takes none (got "
            f"{sorted(backend.compile_specs)})"
        )


def _fault_target(backend: BackendConfig, program: Any) -> str | None:
    """The op `backend.fault.*` names in the exported program, or None without a fault."""
    if not backend.fault.node and backend.fault.debug_handle is None:
        return None
    return fault_target_name(program, backend.fault)


def _from_position(backend: BackendConfig, generation: Path | None) -> int | None:
    """The last position from which a `backend.fault.from_step` fault acts: step s > 0 of a
    generation ends at position prompt_tokens - 1 + s (the prefill at prompt_tokens - 1)."""
    if not backend.fault.from_step:
        return None
    if generation is None:
        raise ExecuTorchFaultError(
            f"backend.fault.from_step={backend.fault.from_step} applies to a generation: set "
            "runtime.generate.prompt_tokens (and new_tokens), or drop from_step"
        )
    return load_signature(generation).prompt_tokens - 1 + int(backend.fault.from_step)


def _shipped_program(
    backend: BackendConfig,
    program: Any,
    samples: list[tuple[Any, ...]],
    generation: Path | None = None,
) -> tuple[str | None, Any, list[LeftInFloat]]:
    """The fault's target op (or None), the program handed to ExecuTorch: faulted (from a
    generation step on, with `backend.fault.from_step`), then at the backend's precision, and
    the linears an 8da4w program leaves in float (each logged as a warning)."""
    left_in_float: list[LeftInFloat] = []
    try:
        target = _fault_target(backend, program)
        if target is not None and target in {str(n) for n in backend.keep_off}:
            log.warning(
                "[lower] backend.fault targets %s, which backend.keep_off keeps off the "
                "delegate: the portable kernel that runs it is not faulted",
                target,
            )
            target = None
        if target is not None:
            kind, value = backend.fault.kind, backend.fault.value
            position = _from_position(backend, generation)
            at_int8 = str(backend.precision) == Precision.int8
            program = insert_fault(program, target, kind, value, position, at_int8)
        keep_float = frozenset(str(n) for n in backend.keep_float)
        at_precision = program_at_precision(
            program, str(backend.precision), samples, keep_float, backend.group_size, left_in_float
        )
        for left in left_in_float:
            log.warning("[lower] left in float: %s", left.line())
        return target, name_fault_ops(at_precision), left_in_float
    except (ExecuTorchPrecisionError, ExecuTorchFaultError) as exc:
        raise ExecuTorchLoweringError(str(exc)) from exc


def _partitioners(backend: BackendConfig) -> list[Any]:
    """The backend's partitioners, `backend.keep_off` ops left out of them."""
    make_partitioners = callable_target(
        {"_target_": backend._target_},
        "backend",
        ExecuTorchLoweringError,
        "package.module.function` returning a list of ExecuTorch partitioners",
    )
    partitioners = make_partitioners()
    keep_off = frozenset(str(n) for n in backend.keep_off)
    if keep_off:  # names were checked against the program before lowering (op_overrides)
        partitioners = [keep_off_partitioner(p, keep_off) for p in partitioners]
    return list(partitioners)


def _evaluation_and_calibration(
    inputs: Path,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The evaluation samples (inputs.pt) and the samples PT2E calibrates on (the same list
    unless the export wrote calibration_inputs.pt beside them: `calibration_file`)."""
    samples = [tuple(s) for s in load_samples(inputs)]
    calibration = calibration_file(inputs)
    if calibration == inputs:
        return samples, samples
    return samples, [tuple(s) for s in load_samples(calibration)]


def lower_with_executorch(
    backend: BackendConfig,
    exported_program: Path,
    inputs: Path,
    run_dir: Path,
    model_name: str,
    observe: str = ObserveMode.off,
    generation: Path | None = None,
) -> tuple[Path, Path, Path, dict[str, float], tuple[Path, ...]]:
    """Write program.pte, lowering.json and ExecuTorch's ETRecord (with `runtime.observe=tap`, the
    instrumented program and taps.json too); (paths..., metrics, tap files). `generation`:
    generation.json (`backend.fault.from_step`); PT2E calibrates on `calibration_file(inputs)`."""
    _check_config(backend)
    try:
        from executorch.exir import to_edge_transform_and_lower
    except ImportError as exc:
        raise ExecuTorchLoweringError(
            f"backend={backend.name} lowers with ExecuTorch: {EXECUTORCH_EXTRA}"
        ) from exc
    started = time.perf_counter()
    program = load_exported_program(exported_program.read_bytes(), str(exported_program))
    samples, calibrating = _evaluation_and_calibration(inputs)
    known = op_names(program.graph_module)  # before any pass sees the program
    target, shipped, left_in_float = _shipped_program(backend, program, calibrating, generation)
    to_tap = copy.deepcopy(shipped) if observe == ObserveMode.tap else None
    edge = to_edge_transform_and_lower(
        shipped, partitioner=_partitioners(backend), generate_etrecord=True
    )
    executorch_program = edge.to_executorch()
    etrecord = executorch_program.get_etrecord()
    runtime_samples = [as_runtime_inputs(s, str(backend.precision)) for s in samples]
    etrecord.update_representative_inputs(runtime_samples)
    seconds = time.perf_counter() - started
    tap_files, tap_metrics = (
        ((), {})
        if to_tap is None
        else _lower_tap_copy(
            backend, to_tap, (etrecord, executorch_program), runtime_samples, run_dir
        )
    )
    program_path = run_dir / ArtifactName.EXECUTORCH_PROGRAM
    _write_bytes(program_path, executorch_program.buffer)
    etrecord_path = run_dir / ArtifactName.ETRECORD
    with atomic_path(etrecord_path) as tmp:
        etrecord.save(str(tmp))
    report, report_path = _write_report(
        backend, etrecord, model_name, target, (edge, known), run_dir, left_in_float
    )
    total, delegated = report["handles"], len(report["delegated_handles"])
    metrics = {
        "partitions": float(len(report["partitions"])),
        "delegated_ops": float(delegated),
        "non_delegated_ops": float(total - delegated),
        "delegated_op_ratio": delegated / max(total, 1),
        "lowering_seconds": seconds,
        "program_bytes": float(len(executorch_program.buffer)),
        "fault_injected": 1.0 if target is not None else 0.0,
        **tap_metrics,
    }
    return program_path, report_path, etrecord_path, metrics, tap_files


def _lower_tap_copy(
    backend: BackendConfig,
    to_tap: Any,
    plain: tuple[Any, Any],
    samples: list[tuple[Any, ...]],
    run_dir: Path,
) -> tuple[tuple[Path, ...], dict[str, float]]:
    """runtime.observe=tap: the instrumented program beside the shipped one (`plain`: its
    ETRecord and ExecuTorch program); (its files, metrics)."""
    from executorch.exir import to_edge_transform_and_lower

    started = time.perf_counter()
    etrecord, executorch_program = plain
    try:
        *paths, metrics = lower_tapped(
            to_tap,
            etrecord,
            executorch_program.buffer,
            _partitioners(backend),
            samples,
            run_dir,
            to_edge_transform_and_lower,
            str(backend.precision),
        )
    except ExecuTorchTapError as exc:
        raise ExecuTorchLoweringError(str(exc)) from exc
    metrics["tap_lowering_seconds"] = time.perf_counter() - started
    return tuple(paths), metrics


def _write_report(
    backend: BackendConfig,
    etrecord: Any,
    model_name: str,
    target: str | None,
    edge_and_names: tuple[Any, list[str]],
    run_dir: Path,
    left_in_float: list[LeftInFloat],
) -> tuple[dict[str, Any], Path]:
    """lowering.json with the delegated ops' names, the op overrides, the fault applied and the
    linears a weight scheme left in float; (its content, its path)."""
    report = _report(backend, etrecord, model_name)
    if str(backend.precision) == Precision["8da4w"]:
        report["group_size"] = backend.group_size
        report["left_in_float"] = [vars(left) for left in left_in_float]
    _name_delegated_ops(report, *edge_and_names)
    _record_requests(report, backend, target)
    report_path = run_dir / ArtifactName.LOWERING_REPORT
    write_json_atomic(report_path, report, indent=2)
    return report, report_path


def _record_requests(report: dict[str, Any], backend: BackendConfig, target: str | None) -> None:
    """The op overrides and the fault as applied (None when kept off or not asked)."""
    report["op_overrides"] = {
        "keep_float": sorted(str(n) for n in backend.keep_float),
        "keep_off": sorted(str(n) for n in backend.keep_off),
    }
    fault = backend.fault
    report["fault_injected"] = (
        None
        if target is None
        else {"node": target, "kind": fault.kind, "value": fault.value}
        | ({"from_step": fault.from_step} if fault.from_step else {})
    )


def _name_delegated_ops(report: dict[str, Any], edge: Any, known: list[str]) -> None:
    """`delegated_ops` (and each partition's `ops` when the delegate calls line up with the
    partitions): the exported program's op names, as backend.keep_off takes them."""
    by_call = delegated_ops_by_partition(edge.exported_program(), known)
    report["delegated_ops"] = [op for ops in by_call for op in ops]
    if len(by_call) == len(report["partitions"]):
        for partition, ops in zip(report["partitions"], by_call, strict=True):
            partition["ops"] = ops


def _report(backend: BackendConfig, etrecord: Any, model_name: str) -> dict[str, Any]:
    """lowering.json: partitions (delegate instructions) and the handles they cover."""
    handle_map = (etrecord._debug_handle_map or {}).get(METHOD, {})
    delegates = (etrecord._delegate_map or {}).get(METHOD, {})
    handles = {h for v in handle_map.values() for h in (v if isinstance(v, list) else [v])}
    partitions = []
    for instruction, meta in sorted(delegates.items(), key=lambda kv: int(kv[0])):
        # ExecuTorch keys the map by int in memory (by str once saved as JSON)
        covered = handle_map.get(instruction, handle_map.get(str(instruction), []))
        partitions.append(
            {
                "instruction_id": int(instruction),
                "backend": meta.get("name", ""),
                "debug_handles": covered if isinstance(covered, list) else [covered],
                "delegate_map_entries": len(meta.get("delegate_map") or {}),
            }
        )
    delegated = sorted({h for p in partitions for h in p["debug_handles"]})
    return {
        "backend": backend.name,
        "backend_target": backend._target_,
        "runtime": "executorch",
        "model": model_name,
        "precision": backend.precision,
        "handles": len(handles),
        "delegated_handles": delegated,
        "partitions": partitions,
    }


def _write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
