"""Recovery's rules on hand-built graphs and ETDumps: the delegate's own map wins, calls are
split per execution, fused clamps join their producer, ambiguous kernels stay unlinked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from stages.analyze.link.linking import ProgramIndex, link_event
from stages.analyze.link.xnnpack.graphs import load_xnnpack_graphs
from stages.analyze.link.xnnpack.recovery import kernel_sequences, needs_recovery, recover_links
from stages.analyze.load.loading import AnalyzeInputError
from stages.formats.etdump.records import ETDumpData, Event, ProfileEvent, RunData
from stages.formats.etrecord import HandleInfo
from stages.formats.etrecord_types import DelegateMapRecord
from stages.formats.executorch.xnnpack_graph import XnnpackGraph, XNode

CALL = 3


def _kernel(name: str, instruction: int = CALL) -> Event:
    return Event(profile_event=ProfileEvent("", 0, instruction, -1, name, b"", 0, 1))


def _call_event(instruction: int = CALL) -> Event:
    return Event(profile_event=ProfileEvent("DELEGATE_CALL", 0, instruction, -1, "", b"", 0, 2))


def _index(own_map: dict[object, tuple[int, ...]] | None = None) -> ProgramIndex:
    record = DelegateMapRecord(0, "XnnpackBackend", dict(own_map or {}), (1, 2, 3, 4))  # type: ignore[arg-type]
    info = HandleInfo(("op",), ("aten.op.default",), ("",), ("",))
    return dataclasses.replace(
        ProgramIndex.empty(),
        handles={h: info for h in (1, 2, 3, 4)},
        delegate_instructions={CALL: record},
        maps=(record,),
    )


def _graph() -> XnnpackGraph:
    nodes = (
        XNode(0, "XNNConv2d", 1, (0, 5, 6), (1,), False),
        XNode(1, "XNNClamp", 2, (1,), (2,), False),
        XNode(2, "XNNStaticReshape", 3, (2,), (3,), False),
        XNode(3, "XNNStaticReshape", 4, (3,), (4,), False),
    )
    return XnnpackGraph("0", nodes, (0,), (4,))


def _dump(*names: str) -> ETDumpData:
    return ETDumpData(0, [RunData("Execute", events=[*map(_kernel, names), _call_event()])])


def test_a_delegate_map_of_its_own_is_used_not_recovered() -> None:
    index = _index({"Convolution (NHWC, F32) IGEMM #1": (1,)})
    assert needs_recovery(index) == []
    recovered, report = recover_links(index, _dump("Convolution #1"), {CALL: _graph()}, "pte")
    assert recovered is index and report.kernels == 0
    assert report.partitions[CALL].startswith("the delegate's own map")
    link = link_event(index, "", CALL, "Convolution (NHWC, F32) IGEMM #1")
    assert link is not None and link.link_source == "map"


def test_fused_clamp_joins_its_producer_and_an_ambiguous_reshape_stays_unlinked() -> None:
    dump = _dump("Convolution (NHWC, F32) IGEMM #1", "Static Reshape (NC) #1")
    index, report = recover_links(_index(), dump, {CALL: _graph()}, "pte")
    conv = link_event(index, "", CALL, "Convolution (NHWC, F32) IGEMM #1")
    assert conv is not None and conv.debug_handles == (1, 2) and conv.link_source == "recovered"
    reshape = link_event(index, "", CALL, "Static Reshape (NC) #1")
    assert reshape is not None and reshape.debug_handles == ()  # one of two reshapes: unknown
    assert (report.kernels, report.linked) == (2, 1)
    assert "different ops" in report.unlinked[0].reason
    call = link_event(index, "DELEGATE_CALL", CALL, None)  # the call still stands for its ops
    assert call is not None and call.debug_handles == (1, 2, 3, 4)


def test_kernel_sequences_split_calls_and_catch_differing_executions() -> None:
    block = RunData(
        "Execute",
        events=[_kernel("A #1"), _kernel("B #1"), _call_event(), _kernel("A #1"), _kernel("B #1")],
    )
    # The same sequence in every execution is kept once: a long run holds no more than one.
    assert kernel_sequences(ETDumpData(0, [block] * 50), [CALL]) == {CALL: [["A #1", "B #1"]]}
    swapped = RunData(
        "Execute",
        events=[_kernel("A #1"), _kernel("B #1"), _call_event(), _kernel("B #1"), _kernel("A #1")],
    )
    assert kernel_sequences(ETDumpData(0, [swapped]), [CALL]) == {
        CALL: [["A #1", "B #1"], ["B #1", "A #1"]]
    }
    other = RunData("Execute", events=[_kernel("B #1"), _kernel("A #1"), _call_event()])
    _, report = recover_links(_index(), ETDumpData(0, [block, other]), {CALL: _graph()}, "pte")
    assert report.linked == 0
    assert {k.reason for k in report.unlinked} == {
        "the call's kernel sequence differs between executions"
    }


def test_a_missing_pte_is_named_with_what_to_pass(tmp_path: Path) -> None:
    missing = tmp_path / "model.pte"
    with pytest.raises(AnalyzeInputError, match=r"analyze\.pte=.*model\.pte: no such file"):
        load_xnnpack_graphs(_index(), None, missing, [CALL])


def test_a_file_that_is_not_a_pte_is_refused_by_name(tmp_path: Path) -> None:
    other = tmp_path / "other.bin"
    other.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(
        AnalyzeInputError, match=r"analyze\.pte=.*other\.bin.*not ExecuTorch's program"
    ):
        load_xnnpack_graphs(_index(), None, other, [CALL])
