"""The serialized XNNPACK graph of each delegate call: from the ETRecord, else from the `.pte`.

ExecuTorch's ETRecord carries the delegates' processed bytes only when its edge program was
recorded after lowering; otherwise the `.pte` (`analyze.pte`, by default the run's
`program.pte`) has them. Either way each graph must fit its call: its XNodes may name only
handles the ETRecord gives that call, or the file belongs to another program and is refused.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from stages.analyze.link.linking import ProgramIndex
from stages.analyze.link.xnnpack.recovery import XNNPACK_BACKEND
from stages.analyze.load.loading import AnalyzeInputError
from stages.formats.etrecord_types import ETRecordError
from stages.formats.executorch.delegates import ExecuTorchProgramError, read_delegate_payloads
from stages.formats.executorch.lowered_modules import lowered_modules
from stages.formats.executorch.xnnpack_graph import (
    NO_ORIGIN_HANDLES,
    XnnpackGraph,
    XnnpackGraphError,
    read_xnnpack_graph,
)
from stages.safe_io.bounded_zip import BoundedZip
from stages.safe_io.tensor_file import UnsafePayloadError


def load_xnnpack_graphs(
    index: ProgramIndex, etrecord: Path | None, pte: Path | None, wanted: list[int]
) -> tuple[dict[int, XnnpackGraph], str]:
    """{delegate instruction: graph} for `wanted`, and where they came from ('' if nowhere)."""
    if not wanted:
        return {}, ""
    instructions = sorted(
        i for i, r in index.delegate_instructions.items() if r.backend_name == XNNPACK_BACKEND
    )
    if etrecord is not None:
        payloads = _from_etrecord(etrecord, instructions)
        if payloads:
            return _graphs(index, payloads, wanted, f"analyze.etrecord={etrecord}"), "etrecord"
    if pte is None:
        return {}, ""
    if not pte.is_file():
        raise AnalyzeInputError(
            f"analyze.pte={pte}: no such file; pass the ExecuTorch program (.pte) the ETRecord "
            "was made with, or analyze.pte=null to leave XNNPACK kernels unlinked"
        )
    try:
        found = read_delegate_payloads(pte.read_bytes(), f"analyze.pte={pte}")
    except ExecuTorchProgramError as exc:
        raise AnalyzeInputError(f"{exc}; pass the .pte this ETRecord was made with") from exc
    payloads = {p.instruction_id: p.processed for p in found if p.backend_id == XNNPACK_BACKEND}
    if sorted(payloads) != instructions:
        raise AnalyzeInputError(
            f"analyze.pte={pte} calls XNNPACK at instructions {sorted(payloads)}, but the "
            f"ETRecord's program at {instructions}: the .pte belongs to another program; pass "
            "the .pte this ETRecord was made with, or analyze.pte=null"
        )
    return _graphs(index, payloads, wanted, f"analyze.pte={pte}"), f"pte: {pte}"


def _from_etrecord(etrecord: Path, instructions: list[int]) -> dict[int, bytes]:
    """Lowered modules in graph order are the delegate calls in instruction order."""
    try:
        with BoundedZip(etrecord, f"analyze.etrecord={etrecord}") as archive:
            modules = lowered_modules(archive, str(etrecord))
    except (ETRecordError, UnsafePayloadError, OSError):
        return {}  # the ETRecord loader has already said what is wrong with it
    xnnpack = [m.processed for m in modules if m.backend_id == XNNPACK_BACKEND]
    if len(xnnpack) != len(instructions):
        return {}
    return dict(zip(instructions, xnnpack, strict=True))


def _graphs(
    index: ProgramIndex, payloads: dict[int, bytes], wanted: list[int], where: str
) -> dict[int, XnnpackGraph]:
    graphs: dict[int, XnnpackGraph] = {}
    for instruction in wanted:
        what = f"{where} (delegate call at instruction {instruction})"
        try:
            graph = read_xnnpack_graph(payloads[instruction], what)
        except XnnpackGraphError as exc:
            raise AnalyzeInputError(str(exc)) from exc
        graph = _attributed(graph, index.handle_attribution)
        _check_handles(index, instruction, graph, what)
        graphs[instruction] = graph
    return graphs


def _attributed(graph: XnnpackGraph, attribution: dict[int, int]) -> XnnpackGraph:
    """XNodes of quantize/dequantize-only handles carry the handle of the op they serve."""
    if not attribution:
        return graph
    nodes = tuple(
        replace(n, debug_handle=attribution.get(n.debug_handle, n.debug_handle))
        for n in graph.nodes
    )
    return replace(graph, nodes=nodes)


def _check_handles(index: ProgramIndex, instruction: int, graph: XnnpackGraph, what: str) -> None:
    known = set(index.delegate_instructions[instruction].delegated_handles) or set(index.handles)
    foreign = sorted({n.debug_handle for n in graph.nodes} - known - NO_ORIGIN_HANDLES)
    if known and foreign:
        raise AnalyzeInputError(
            f"{what}: its XNodes name debug handles {foreign[:5]} that the ETRecord does not give "
            "this call; the file belongs to another program (pass the matching .pte)"
        )
