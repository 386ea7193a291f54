"""ExecuTorch's ETRecord read into the view the analysis uses (the `ETRecord` dataclass).

Only after `verify_executorch_etrecord` passed on the same bytes: ExecuTorch's own parser then
reads them from memory. The reference program is what ExecuTorch's Inspector compares against
by default: the ATen `exported_program` with the edge program's debug handles carried back to
it, or the edge program itself when that fails. Instructions map to handles (`debug_handle_map`),
delegate instructions to their backend and identifier map (`delegate_map`), and
`instruction_id_to_num_outs_map` says how many of an instruction's logged values are outputs.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import torch

from stages.formats.etrecord_types import DelegateMapRecord, ETRecordError
from stages.formats.float_reference import (
    FloatReferenceError,
    activation_qparams,
    injected_faults,
    left_in_float,
    lowered_precision,
    qdq_attribution,
    remapped,
    take_handles,
)
from stages.formats.samples import Samples, samples_as_inspector_reads
from stages.handles.debug_handles import DEBUG_HANDLE_META, DelegateIdentifier

EXECUTORCH_EXTRA = "pip install -e '.[executorch]'"
SOURCE_FORMAT = "executorch"
METHOD = "forward"  # the method analysed when the program has it (Inspector's default too)
UNSET_DEBUG_HANDLE = 0  # ExecuTorch marks nodes the edge program dropped with handle 0
NS_PER_MS = 1e6


def read_executorch_etrecord(
    data: bytes, what: str, method: str | None = None, float_program: Path | None = None
) -> dict[str, Any]:
    """The fields of the analysis view (`ETRecord`) of an ExecuTorch ETRecord whose bytes
    passed the safety check, for `method` (default: forward, else its first method).
    `float_program`: the exported fp32 program an int8/fp16 program was made from, if at hand:
    then it is the reference (`stages.formats.float_reference`)."""
    try:
        from executorch.devtools import parse_etrecord
    except ImportError as exc:
        raise ETRecordError(
            f"{what} is ExecuTorch's ETRecord format; reading it needs ExecuTorch: {EXECUTORCH_EXTRA}"
        ) from exc
    try:
        parsed = parse_etrecord(io.BytesIO(data))  # ZipFile reads a file object too
    except Exception as exc:  # ExecuTorch raises RuntimeError, KeyError, SerializeError, ...
        raise ETRecordError(f"{what}: ExecuTorch could not parse its ETRecord ({exc})") from exc
    methods = recorded_methods(parsed)
    if method is not None and method not in methods:
        raise ETRecordError(
            f"{what} records no method {method!r} (it records {', '.join(methods) or 'none'}); "
            "set analyze.method to one of them"
        )
    method = method or (METHOD if METHOD in methods or not methods else methods[0])
    program, graph_name = _reference_program(parsed, what, method)
    precision = lowered_precision(program)
    faults = injected_faults(program)
    remap: dict[int, int] = {}
    qparams = {}
    if (precision != "fp32" or faults) and float_program is not None and method == METHOD:
        remap = qdq_attribution(program)
        try:
            reference = take_handles(_float_program(float_program), program, str(float_program))
        except FloatReferenceError as exc:
            raise ETRecordError(f"{what}: {exc}") from exc
        qparams, program = activation_qparams(program, reference), reference
        graph_name = f"exported fp32 program {float_program.name}"
    group_size, left = left_in_float(program) if precision == "8da4w" else (0, [])
    samples = samples_as_inspector_reads(parsed._representative_inputs, _user_inputs(program))
    if remap or graph_name.startswith("exported fp32"):
        samples = [tuple(_widened(t) for t in s) for s in samples]
    view = _view(parsed, program, graph_name, samples, data, method, remap)
    view["lowering_info"]["precision"] = precision
    if faults:
        view["lowering_info"]["fault_injected"] = faults[0]
    if group_size:  # 8da4w: its group size and the linears it left in float
        view["lowering_info"]["group_size"] = group_size
        view["lowering_info"]["left_in_float"] = left
    if qparams:  # the key of stages.analyze.compare.expected_error.ACTIVATION_QPARAMS
        view["lowering_info"]["activation_qparams"] = {k: list(v) for k, v in qparams.items()}
    if remap:  # the key of stages.analyze.link.linking.QDQ_ATTRIBUTION
        view["lowering_info"]["qdq_handle_attribution"] = {str(k): v for k, v in remap.items()}
    view["lowering_info"]["method"] = method
    view["lowering_info"]["methods"] = methods
    return view


def _float_program(path: Path) -> torch.export.ExportedProgram:
    """The exported fp32 program, read and parsed here (a fresh graph this may change)."""
    from stages.formats.exported_program import (
        ExportedProgramError,
        parse_exported_program,
        read_exported_program_file,
    )

    what = f"analyze.exported_program={path}"
    try:
        data, _ = read_exported_program_file(path, what)
        return parse_exported_program(data, what)
    except ExportedProgramError as exc:
        raise ETRecordError(str(exc)) from exc


def _widened(tensor: torch.Tensor) -> torch.Tensor:
    """A half representative input as the fp32 reference takes it."""
    return tensor.float() if tensor.dtype == torch.float16 else tensor


def recorded_methods(parsed: Any) -> list[str]:
    """The program's methods the ETRecord describes (its per-method maps and edge programs)."""
    names: set[str] = set()
    for mapping in (parsed._debug_handle_map, parsed._delegate_map):
        names |= set(mapping or {})
    edge = parsed.edge_dialect_program
    if isinstance(edge, dict):
        names |= set(edge)
    return sorted(names, key=lambda n: (n != METHOD, n))


def _reference_program(
    parsed: Any, what: str, method: str
) -> tuple[torch.export.ExportedProgram, str]:
    """ATen program with the edge program's handles carried back, else the edge program."""
    edge = edge_all = parsed.edge_dialect_program
    if isinstance(edge, dict):
        edge = edge.get(method)
    aten = parsed.exported_program
    if isinstance(aten, dict):  # a multi-method program records one per method
        aten = aten.get(method)
    elif method != METHOD and isinstance(edge_all, dict):  # one ATen program: forward's
        aten = None
    if aten is not None and edge is not None and _carried_back(aten, parsed, edge):
        return _clean_handles(aten), "exported_program"
    if edge is None:
        raise ETRecordError(
            f"{what} records no edge program for method {method!r}; generate it with "
            "to_edge_transform_and_lower(..., generate_etrecord=True)"
        )
    return _clean_handles(edge), "edge_dialect_exported_program"


def _carried_back(aten: Any, parsed: Any, edge: Any) -> bool:
    """ExecuTorch's own propagation of the edge program's handles to the ATen program; False
    when it cannot (it raises KeyError on an edge program whose nodes carry no handles, as
    `to_edge` leaves them before `to_executorch`): then the edge program is the reference.
    A program with dynamic shapes has `sym_size` nodes the ATen program re-exported, which
    ExecuTorch's check refuses: carried back without it when they are all that is unmatched."""
    from executorch.devtools.inspector._inspector_utils import propagate_back_debug_handle

    try:
        if propagate_back_debug_handle(aten, parsed.export_graph_id, edge):
            return True
        if not _sym_size_handles(edge):
            return False
        propagate_back_debug_handle(
            aten, parsed.export_graph_id, edge, disable_debug_handle_valdiation=True
        )
    except (KeyError, AttributeError, TypeError, ValueError):
        return False
    carried = {n.meta.get(DEBUG_HANDLE_META) for n in aten.graph_module.graph.nodes}
    return _op_handles(edge) - _sym_size_handles(edge) <= carried


def _op_handles(program: Any) -> set[Any]:
    return {
        n.meta.get(DEBUG_HANDLE_META)
        for n in program.graph_module.graph.nodes
        if n.op == "call_function" and n.meta.get(DEBUG_HANDLE_META) is not None
    }


def _sym_size_handles(program: Any) -> set[Any]:
    """Handles of the edge program's `sym_size` nodes (a dynamic dimension's size)."""
    return {
        n.meta.get(DEBUG_HANDLE_META)
        for n in program.graph_module.graph.nodes
        if n.op == "call_function" and "sym_size" in str(n.target)
    }


def _clean_handles(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """Integer handles only: tuples keep their first, ExecuTorch's unset handle 0 is dropped."""
    for node in program.graph_module.graph.nodes:
        handle = node.meta.get(DEBUG_HANDLE_META)
        if isinstance(handle, tuple | list):
            handle = handle[0] if handle else None
        if handle is None or int(handle) == UNSET_DEBUG_HANDLE:
            node.meta.pop(DEBUG_HANDLE_META, None)
        else:
            node.meta[DEBUG_HANDLE_META] = int(handle)
    return program


def _user_inputs(program: torch.export.ExportedProgram) -> int:
    """How many inputs one run of the program takes (parameters and buffers aside)."""
    return len(program.graph_signature.user_inputs)


def _identifier(key: str) -> DelegateIdentifier:
    """JSON keys are strings; ExecuTorch's integer identifiers are logged as ints."""
    return int(key) if key.lstrip("-").isdigit() else key


def _lowering_info(
    parsed: Any, graph_name: str, method: str, remap: dict[int, int]
) -> tuple[dict[str, Any], list[DelegateMapRecord]]:
    handle_map = (parsed._debug_handle_map or {}).get(method, {})
    delegates = (parsed._delegate_map or {}).get(method, {})
    outs = (parsed._instruction_id_to_num_outs_map or {}).get(method, {})
    maps: list[DelegateMapRecord] = []
    delegate_instructions: dict[str, int] = {}
    for partition_id, (instruction, meta) in enumerate(sorted(delegates.items(), key=_by_int)):
        identifiers = dict(meta.get("delegate_map") or {})
        maps.append(
            DelegateMapRecord(
                partition_id=partition_id,
                backend_name=str(meta.get("name", "")),
                debug_handle_map={
                    _identifier(str(k)): tuple(remapped(_handles(v), remap))
                    for k, v in identifiers.items()
                },
                delegated_handles=tuple(
                    remapped(_handles(handle_map.get(str(instruction), ())), remap)
                ),
            )
        )
        delegate_instructions[str(instruction)] = partition_id
    backends = sorted({m.backend_name for m in maps})
    info = {
        "source_format": SOURCE_FORMAT,
        "reference_graph": graph_name,
        "backend": "+".join(backends),
        "precision": "fp32",
        "ticks_per_ms": NS_PER_MS,
        "instruction_debug_handles": {
            str(i): remapped(_handles(handles), remap)
            for i, handles in handle_map.items()
            if str(i) not in delegate_instructions
        },
        "delegate_instructions": delegate_instructions,
        "instruction_num_outputs": {str(i): int(n) for i, n in outs.items()},
    }
    return info, maps


def _handles(value: Any) -> list[int]:
    """ExecuTorch stores one handle as an int, several as a list."""
    return [int(h) for h in value] if isinstance(value, list | tuple) else [int(value)]


def _by_int(item: tuple[str, Any]) -> int:
    return int(item[0])


def _view(
    parsed: Any,
    program: torch.export.ExportedProgram,
    graph_name: str,
    samples: Samples,
    data: bytes,
    method: str,
    remap: dict[int, int],
) -> dict[str, Any]:
    from stages.handles.handle_info import collect_handle_info

    info, maps = _lowering_info(parsed, graph_name, method, remap)
    outputs = parsed._reference_outputs or {}
    reference = outputs.get(method, []) if isinstance(outputs, dict) else []
    return {
        "reference_program_bytes": json.dumps({"executorch_etrecord_sha256": _sha(data)}).encode(),
        "representative_inputs": samples,
        "reference_outputs": [tuple(o) if isinstance(o, tuple | list) else (o,) for o in reference],
        "handles": collect_handle_info(program),
        "delegate_maps": maps,
        "lowering_info": info,
        "loaded_program": program,
    }


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
