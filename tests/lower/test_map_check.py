"""The lower stage checks each partition's debug-handle map against the partition's nodes."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import DictConfig

from stages.backends.backend_api import PartitionGraph
from stages.closed_sets import MapFindingKind
from stages.export.debug_handle_pass import assign_debug_handles
from stages.handles.graph_handles import iter_operator_nodes
from stages.handover.etrecord import load_etrecord
from stages.handover.exported_program import load_exported_program
from stages.lower.map_check import MapShapeError, check_partition_map
from stages.lower.stage import LoweringError
from tests.helpers.lowering import export_and_lower
from tests.helpers.map_bug_backends import UNKNOWN_HANDLE

BUGS = "tests.helpers.map_bug_backends"


def _lower(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, backend: str, *more: str
) -> tuple[dict[str, Any], dict[str, int], Any]:
    """lowering.json, op name → handle of the exported program, and the lower artifacts."""
    cfg = tiny_cfg(
        "mlp",
        "backend=xnnpack",
        f"backend._target_={BUGS}.{backend}",
        *more,
    )
    exported, lowered = export_and_lower(cfg, tmp_path)
    program = load_exported_program(exported.exported_program.read_bytes(), "exported.pt2")
    handles = {
        n.name: int(n.meta["debug_handle"]) for n in iter_operator_nodes(program.graph_module)
    }
    return json.loads(lowered.lowering_report.read_text()), handles, lowered


def _only(report: dict[str, Any], kind: MapFindingKind) -> dict[str, Any]:
    found = [f for f in report["delegate_map_check"] if f["kind"] == kind.value]
    assert len(found) == 1, report["delegate_map_check"]
    return found[0]


def test_a_correct_map_has_no_findings(tiny_cfg: Callable[..., DictConfig], tmp_path: Path) -> None:
    cfg = tiny_cfg("mlp", "backend=xnnpack")
    _, lowered = export_and_lower(cfg, tmp_path)
    report = json.loads(lowered.lowering_report.read_text())
    assert report["delegate_map_check"] == []
    assert lowered.metrics["delegate_map_errors"] == 0.0


def test_empty_map_is_an_error_naming_every_op(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        report, handles, lowered = _lower(tiny_cfg, tmp_path, "EmptyMapBackend")
    finding = _only(report, MapFindingKind.empty_map)
    assert finding["severity"] == "error" and finding["partition_id"] == 0
    assert finding["identifiers"] == []
    assert finding["debug_handles"] == sorted(handles.values())
    assert lowered.metrics["delegate_map_errors"] == 1.0
    lines = [r.getMessage() for r in caplog.records if "delegate map check" in r.getMessage()]
    assert len(lines) == 1 and "partition 0 (empty_map_npu) empty_map" in lines[0]
    # The ETRecord carries the findings for the analysis.
    record = load_etrecord(lowered.etrecord)
    assert record.lowering_info["delegate_map_check"] == report["delegate_map_check"]


def test_fused_kernel_mapping_only_its_first_op(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    report, handles, _ = _lower(tiny_cfg, tmp_path, "FirstOpOnlyBackend")
    finding = _only(report, MapFindingKind.uncovered_handles)
    assert finding["debug_handles"] == [handles["relu"], handles["relu_1"], handles["add"]]
    assert finding["ops"] == ["relu", "relu_1", "add"]
    # The kernels (generated ids 0 and 1) whose output may be the uncovered ops' are named.
    assert finding["identifiers"] == [0, 1] and finding["not_comparable"] == [0, 1]


def test_handle_not_in_the_graph(tiny_cfg: Callable[..., DictConfig], tmp_path: Path) -> None:
    report, handles, _ = _lower(tiny_cfg, tmp_path, "UnknownHandleBackend")
    finding = _only(report, MapFindingKind.unknown_handles)
    assert (finding["identifiers"], finding["debug_handles"]) == ([0], [UNKNOWN_HANDLE])
    assert finding["severity"] == "error"
    assert finding["not_comparable"] == []  # still compared on its own ops (linear, relu)
    assert f"handles {[handles['linear'], handles['relu']]}" in finding["message"]


def test_missing_entry_leaves_its_ops_uncovered(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    report, handles, _ = _lower(tiny_cfg, tmp_path, "MissingEntryBackend")
    finding = _only(report, MapFindingKind.uncovered_handles)
    assert finding["debug_handles"] == [handles["linear_2"]]
    assert finding["identifiers"] == [1]  # the kernel ending in `add` feeds linear_2


def test_shared_handles_are_a_warning(tiny_cfg: Callable[..., DictConfig], tmp_path: Path) -> None:
    report, handles, lowered = _lower(tiny_cfg, tmp_path, "SharedHandleBackend")
    finding = _only(report, MapFindingKind.shared_handles)
    first = handles["linear"]
    assert finding["identifiers"] == [f"kernel_{first}", f"prepack_{first}"]
    assert finding["debug_handles"] == [first] and finding["severity"] == "warning"
    assert lowered.metrics["delegate_map_warnings"] == 1.0
    assert lowered.metrics["delegate_map_errors"] == 0.0


def test_a_map_of_the_wrong_shape_is_refused(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    with pytest.raises(LoweringError, match=r"handles are ints .*BadHandleTypeBackend"):
        _lower(tiny_cfg, tmp_path, "BadHandleTypeBackend")


@pytest.fixture
def partition() -> PartitionGraph:
    """linear → relu → linear (handles 1, 2, 3) as one partition of a real exported program."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    program = torch.export.export(model, (torch.randn(1, 4),))
    assign_debug_handles(program)
    nodes = [n for n in program.graph.nodes if n.op == "call_function"]
    return PartitionGraph(0, nodes, [], [nodes[-1]], {}, {})


@pytest.mark.parametrize(
    ("raw", "kinds", "handles"),
    [
        ({0: (1, 2, 3)}, [], []),
        ({0: (1, 2), 1: (3, 0)}, ["unknown_handles"], [[0]]),
        ({0: (1,), 1: (3,)}, ["uncovered_handles"], [[2]]),
        ({"a": (1, 2), "b": (2, 3)}, ["shared_handles"], [[2]]),
        ({0: (1, 2, 3), 1: ()}, ["unknown_handles"], [[]]),
        ({}, ["empty_map"], [[1, 2, 3]]),
    ],
)
def test_partition_map_findings(
    partition: PartitionGraph, raw: dict[Any, Any], kinds: list[str], handles: list[list[int]]
) -> None:
    findings = check_partition_map("npu", partition, raw)
    assert [f.kind.value for f in findings] == kinds
    assert [list(f.handles) for f in findings] == handles
    assert all(f.partition_id == 0 and f.backend_name == "npu" for f in findings)


def test_uncovered_op_after_a_fused_kernel_makes_that_kernel_not_comparable(
    partition: PartitionGraph,
) -> None:
    (finding,) = check_partition_map("npu", partition, {"k0": (1,), "k1": (3,)})
    assert finding.identifiers == ("k0",) and finding.not_comparable == ("k0",)
    assert finding.ops == ("relu",)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({True: (1,)}, "use an int or a str"),
        ({-1: (1,)}, "reads as 'no identifier'"),
        ({"": (1,)}, "reads as 'no identifier'"),
        ({0: 1}, "map each identifier to a tuple"),
        ({0: (1.0,)}, "debug handles are ints"),
        ([(0, (1,))], "not a dict"),
    ],
)
def test_a_malformed_map_is_refused(partition: PartitionGraph, raw: Any, message: str) -> None:
    with pytest.raises(MapShapeError, match=message):
        check_partition_map("npu", partition, raw)
