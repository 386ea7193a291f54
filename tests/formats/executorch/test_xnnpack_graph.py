"""ExecuTorch's serialized XNNPACK graphs, read from a real `.pte` and a real ETRecord.

The program is lowered the older way (`to_edge` + `to_backend` + `generate_etrecord`), which
records the edge program after lowering, so the ETRecord carries the processed bytes too; both
sources must give the same graphs, whose handles are the ones the ETRecord gives each call.
Damaged bytes raise the format's own error, never anything else.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from stages.formats.executorch.delegates import ExecuTorchProgramError, read_delegate_payloads
from stages.formats.executorch.lowered_modules import lowered_modules
from stages.formats.executorch.xnnpack_graph import (
    NO_ORIGIN_HANDLES,
    XnnpackGraphError,
    is_xnnpack_payload,
    read_xnnpack_graph,
)
from stages.safe_io.bounded_zip import BoundedZip
from tests.helpers.executorch_artifacts import MixedModel

pytestmark = pytest.mark.executorch


@dataclass(frozen=True)
class LoweredFiles:
    program: Path
    etrecord: Path
    etdump: Path


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> LoweredFiles:
    pytest.importorskip(
        "executorch.exir", reason="needs the executorch extra: pip install -e '.[executorch]'"
    )
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools import generate_etrecord
    from executorch.exir import to_edge
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    out = tmp_path_factory.mktemp("xnnpack-graph")
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    exported = torch.export.export(MixedModel().eval(), (x,))
    edge = to_edge(exported).to_backend(XnnpackPartitioner())
    program = copy.deepcopy(edge).to_executorch()
    files = LoweredFiles(out / "model.pte", out / "etrecord.bin", out / "etdump.etdp")
    generate_etrecord(str(files.etrecord), edge, program, exported_program=exported)
    files.program.write_bytes(program.buffer)
    module = _load_for_executorch_from_buffer(program.buffer, enable_etdump=True)
    module.run_method("forward", (x,))
    module.write_etdump_result_to_file(str(files.etdump))
    return files


def _call_handles(etrecord: Path) -> dict[int, set[int]]:
    with zipfile.ZipFile(etrecord) as archive:
        raw = json.loads(archive.read("debug_handle_map"))["forward"]
    return {int(i): set(h if isinstance(h, list) else [h]) for i, h in raw.items()}


def test_pte_delegates_are_xnnpack_graphs_naming_their_calls_handles(lowered: LoweredFiles) -> None:
    payloads = read_delegate_payloads(lowered.program.read_bytes(), str(lowered.program))
    assert [p.backend_id for p in payloads] == ["XnnpackBackend"] * len(payloads) and payloads
    handles = _call_handles(lowered.etrecord)
    kinds, named_anywhere = set(), set()
    for payload in payloads:
        graph = read_xnnpack_graph(payload.processed, "test")
        kinds |= {n.kind for n in graph.nodes}
        named = {n.debug_handle for n in graph.nodes} - NO_ORIGIN_HANDLES
        assert named <= handles[payload.instruction_id]  # nodes passes added carry 65535
        named_anywhere |= named
    assert named_anywhere and {"XNNFullyConnected", "XNNMultiply"} <= kinds


def test_etrecord_lowered_modules_carry_the_same_graphs(lowered: LoweredFiles) -> None:
    modules = lowered_modules(BoundedZip(lowered.etrecord, "test"), "test")
    payloads = read_delegate_payloads(lowered.program.read_bytes(), "test")
    assert [m.processed for m in modules] == [p.processed for p in payloads]


def test_recovery_loads_graphs_from_the_etrecord_without_a_pte(lowered: LoweredFiles) -> None:
    from stages.analyze.link.linking import ProgramIndex
    from stages.analyze.link.xnnpack.graphs import load_xnnpack_graphs
    from stages.formats.etrecord_types import DelegateMapRecord

    calls = {i: h for i, h in _call_handles(lowered.etrecord).items() if i in (0, 2)}
    records = {
        i: DelegateMapRecord(n, "XnnpackBackend", {}, tuple(sorted(h)))
        for n, (i, h) in enumerate(sorted(calls.items()))
    }
    index = dataclasses.replace(
        ProgramIndex.empty(), delegate_instructions=records, maps=tuple(records.values())
    )
    graphs, source = load_xnnpack_graphs(index, lowered.etrecord, None, sorted(records))
    assert source == "etrecord" and sorted(graphs) == sorted(records)
    pte = {
        p.instruction_id: p.processed
        for p in read_delegate_payloads(lowered.program.read_bytes(), "t")
    }
    assert all(graphs[i] == read_xnnpack_graph(pte[i], "t") for i in graphs)


def test_damaged_graph_bytes_raise_only_the_formats_error(lowered: LoweredFiles) -> None:
    payload = read_delegate_payloads(lowered.program.read_bytes(), "test")[0].processed
    assert is_xnnpack_payload(payload)
    rng = random.Random(0)
    offset, size = struct.unpack_from("<II", payload, 10)  # the header's flatbuffer range
    for cut in range(0, offset + size, max(1, (offset + size) // 64)):
        with pytest.raises(XnnpackGraphError, match="damaged"):
            read_xnnpack_graph(payload[:cut], "damaged")
    for _ in range(300):
        damaged = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            read_xnnpack_graph(bytes(damaged), "damaged")
        except XnnpackGraphError as exc:
            assert "damaged" in str(exc)


def test_damaged_programs_raise_only_the_formats_error(lowered: LoweredFiles) -> None:
    data = lowered.program.read_bytes()
    rng = random.Random(1)
    for _ in range(200):
        damaged = bytearray(data[: rng.randrange(8, len(data) + 1)])
        for _ in range(rng.randint(0, 3)):
            damaged[rng.randrange(8, len(damaged))] = rng.randrange(256)
        try:
            read_delegate_payloads(bytes(damaged), "damaged.pte")
        except ExecuTorchProgramError as exc:
            assert "damaged.pte" in str(exc)
    with pytest.raises(ExecuTorchProgramError, match="not ExecuTorch's program"):
        read_delegate_payloads(b"PK\x03\x04" + bytes(60), "other.zip")
    with pytest.raises(XnnpackGraphError, match="not ExecuTorch's XNNPACK processed bytes"):
        read_xnnpack_graph(b"\x00" * 64, "other.bin")
