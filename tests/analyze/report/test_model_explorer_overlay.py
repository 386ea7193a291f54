"""Model Explorer overlays: keyed by the exported program's nodes, in node_data_builder's format."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from stages.analyze.config import AnalyzeConfig
from stages.analyze.report.model_explorer_overlay import (
    ADAPTER_GRAPH_ID,
    EXACT_SNR_DB,
    OverlayFile,
    encode_overlay,
    latency_overlay,
    placement_overlay,
)
from stages.analyze.report.node_facts import NodeFacts, Placement
from stages.analyze.stage import run_analyze
from stages.handles.debug_handles import DEBUG_HANDLE_META
from stages.handover.etrecord import pack_etrecord
from stages.handover.exported_program import load_exported_program
from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.optional import require_explorer


def _overlay(run_dir: Path, name: OverlayFile) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / name).read_text())
    assert list(data) == [ADAPTER_GRAPH_ID]
    return dict(data[ADAPTER_GRAPH_ID])


@pytest.fixture(scope="module")
def fault_run(run_tiny: RunTiny) -> Path:
    return run_tiny("fault-vit-xnnpack", "vit", "backend=xnnpack", "backend.fault.node=linear_1")


def test_overlays_are_keyed_by_the_exported_programs_top_level_nodes(fault_run: Path) -> None:
    program = load_exported_program(fault_run / "exported.pt2")
    top_level = {n.name: n for n in program.graph_module.graph.nodes}
    operators = {
        name
        for name, n in top_level.items()
        if n.op == "call_function" and DEBUG_HANDLE_META in n.meta and "getitem" not in name
    }
    placement = _overlay(fault_run, OverlayFile.PLACEMENT)["results"]
    assert set(placement) == operators  # every operator node lit, nothing that is not a node
    lowering = json.loads((fault_run / "lowering.json").read_text())
    for partition in lowering["partitions"]:
        for op in partition["ops"]:
            assert placement[op]["value"] == f"xnnpack partition {partition['partition_id']}"
    for rejected in lowering["rejected_ops"]:
        assert placement[rejected["node"]]["value"] == f"left out: {rejected['reason']}"
    for name in OverlayFile:
        assert set(_overlay(fault_run, name)["results"]) <= set(top_level), name


def test_latency_spreads_a_fused_kernel_over_its_ops(fault_run: Path) -> None:
    latency = _overlay(fault_run, OverlayFile.LATENCY)
    assert "split evenly over the ops it covers" in latency["name"]
    events = [json.loads(line) for line in _event_lines(fault_run)]
    fused = [e for e in events if len(e["op_names"]) > 1]
    assert fused, "the tiny vit on xnnpack fuses linear+gelu / linear+add"
    for event in fused:
        for op in event["op_names"]:
            assert latency["results"][op]["value"] == pytest.approx(
                event["p50"] / len(event["op_names"])
            )
    total = sum(r["value"] for r in latency["results"].values())
    assert total == pytest.approx(sum(e["p50"] for e in events if e["op_names"]))


def _event_lines(run_dir: Path) -> list[str]:
    import csv

    with (run_dir / "events.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        if r["event_name"] in ("Method::execute", "DELEGATE_CALL") or r["event_block_name"] == (
            "Default"
        ):
            continue
        out.append(json.dumps({"op_names": json.loads(r["op_names"]), "p50": float(r["p50"])}))
    return out


def test_gap_overlays_highlight_the_first_divergence(fault_run: Path) -> None:
    first = read_summary(fault_run)["first_divergence"]
    assert "linear_1" in first["op_names"]
    local = _overlay(fault_run, OverlayFile.LOCAL_GAP)
    accumulated = _overlay(fault_run, OverlayFile.ACCUMULATED_GAP)
    divergence = _overlay(fault_run, OverlayFile.DIVERGENCE)["results"]
    for op in first["op_names"]:
        assert local["results"][op]["value"] == pytest.approx(float(first["local_gap"]))
        assert local["results"][op]["bgColor"] == accumulated["results"][op]["bgColor"]
        assert divergence[op]["value"] == "first divergence"
    assert "local gap: snr" in local["name"] and "threshold 60" in local["name"]
    assert next(t["value"] for t in local["thresholds"]) == read_summary(fault_run)["threshold"]
    # Exact matches (SNR = inf) are drawn at the cap, never written as Infinity.
    assert max(r["value"] for r in local["results"].values()) == EXACT_SNR_DB
    highlighted = [k for k, v in local["results"].items() if "bgColor" in v]
    assert sorted(highlighted) == sorted(first["op_names"])


def test_overlays_are_logged_as_stage_artifacts(fault_run: Path) -> None:
    listed = read_summary(fault_run)["artifacts"]["overlays"]
    assert sorted(Path(p).name for p in listed) == sorted(OverlayFile)


def _builder_round_trip(text: str) -> str:
    """Parse a file strictly into node_data_builder's dataclasses and serialise it back."""
    from model_explorer import node_data_builder as ndb

    graphs = {}
    for graph_id, graph in json.loads(text).items():
        fields = dict(graph)
        graphs[graph_id] = ndb.GraphNodeData(
            results={k: ndb.NodeDataResult(**v) for k, v in fields.pop("results").items()},
            thresholds=[ndb.ThresholdItem(**t) for t in fields.pop("thresholds")],
            gradient=[ndb.GradientItem(**g) for g in fields.pop("gradient")],
            **fields,  # an unknown key raises TypeError here
        )
    return str(ndb.ModelNodeData(graphsData=graphs).to_json_string(indent=None))


def test_files_validate_against_node_data_builder(fault_run: Path) -> None:
    require_explorer()
    for name in OverlayFile:
        text = (fault_run / name).read_text()
        assert json.loads(_builder_round_trip(text)) == json.loads(text), name


def test_the_json_is_what_node_data_builder_writes() -> None:
    require_explorer()
    from model_explorer import node_data_builder as ndb

    node = NodeFacts("conv2d", 1, "aten.conv2d.default", "patch_embed", Placement("delegated"))
    node.latency = 0.25
    other = NodeFacts("add", 2, "aten.add.Tensor", "blocks.0", Placement("left_out", reason="x"))
    for overlay in (latency_overlay([node], "ms"), placement_overlay([node, other])):
        graph = ndb.GraphNodeData(
            results={k: ndb.NodeDataResult(**v) for k, v in overlay.results.items()},
            name=overlay.name,
            thresholds=[ndb.ThresholdItem(**t) for t in overlay.thresholds],
            gradient=[ndb.GradientItem(**g) for g in overlay.gradient],
        )
        by_builder = ndb.ModelNodeData(graphsData={"graph": graph}).to_json_string(indent=None)
        assert encode_overlay(overlay) == by_builder
    encoded = json.loads(encode_overlay(latency_overlay([node], "ms")))
    assert encoded["graph"]["results"] == {"conv2d": {"value": 0.25}}
    assert math.isclose(encoded["graph"]["gradient"][-1]["stop"], 1)


def test_analyze_only_run_writes_the_same_overlays(fault_run: Path, tmp_path: Path) -> None:
    """A bring-your-own analysis (files from elsewhere, no exported.pt2) gets the same overlays."""
    elsewhere = tmp_path / "device"
    elsewhere.mkdir()
    for name in ("etdump.etdp", "debug.bin"):
        shutil.copy(fault_run / name, elsewhere / name)
    # Carried alone, the run's ETRecord must embed its program: packed, as a user shares it.
    pack_etrecord(fault_run / "etrecord.zip", elsewhere / "etrecord.zip")
    out = tmp_path / "analysis"
    out.mkdir()
    artifacts = run_analyze(
        AnalyzeConfig(),
        elsewhere / "etdump.etdp",
        elsewhere / "debug.bin",
        elsewhere / "etrecord.zip",
        out,
    )
    assert sorted(p.name for p in artifacts.overlays) == sorted(OverlayFile)
    for name in (OverlayFile.PLACEMENT, OverlayFile.DIVERGENCE):
        assert _overlay(out, name) == _overlay(fault_run, name)
    assert set(_overlay(out, OverlayFile.LATENCY)["results"]) == set(
        _overlay(fault_run, OverlayFile.LATENCY)["results"]
    )
    without_etrecord = run_analyze(AnalyzeConfig(), elsewhere / "etdump.etdp", None, None, out)
    assert without_etrecord.overlays == ()  # no node names to key by: events and timings only
    assert not list(out.glob("explorer_*.json"))  # the earlier analysis's overlays are gone
