"""The analyze stage on real tiny runs: verdicts, first divergence, tables, trace, mismatches."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from stages.analyze.compare.comparators import build_comparators
from stages.analyze.compare.numeric_gap import compute_numeric_gap
from stages.analyze.compare.runtime_outputs import runtime_outputs
from stages.analyze.compare.verdict import VerdictConfigError, decide
from stages.analyze.config import AnalyzeConfig
from stages.analyze.link.event_table import EVENT_COLUMNS, TimeUnitError
from stages.analyze.link.linking import ProgramIndex, ProgramMismatchError
from stages.analyze.link.metadata_parsers import MetadataParserError
from stages.analyze.report.terminal_report import format_terminal_report
from stages.analyze.stage import run_analyze
from stages.formats.etdump import read_etdump, write_etdump
from stages.formats.etdump.records import FINGERPRINT_EVENT, STAMP_EVENTS
from stages.handover.etrecord import etrecord_program, load_etrecord
from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.executorch_fixtures import executorch_fixtures

MODELS = ["vit", "mobilenet_v2", "llm"]
BACKENDS = ["xnnpack", "qnn"]
# One delegated op per model (delegated on both backends), and one op the xnnpack partitioner
# leaves to the portable operators, to fault the operator path too.
FAULTED_NODE = {"vit": "linear_1", "mobilenet_v2": "conv2d_1", "llm": "linear_1"}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("backend", [*BACKENDS, "qnn-fp32"])
@pytest.mark.parametrize("model", MODELS)
def test_clean_run_passes_and_kernel_rows_name_their_ops(
    run_tiny: RunTiny, model: str, backend: str
) -> None:
    name, _, precision = backend.partition("-")
    extra = [f"backend.precision={precision}"] if precision else []
    run_dir = run_tiny(f"clean-{model}-{backend}", model, f"backend={name}", *extra)
    summary = read_summary(run_dir)
    assert summary["verdict"] == "pass", summary["first_divergence"]
    assert summary["first_divergence"] is None
    assert summary["compared_outputs"] > 0
    record = load_etrecord(run_dir / "etrecord.zip")
    names = {h: info.op_names for h, info in record.handles.items()}
    gaps = _rows(run_dir / "numeric_gap.csv")
    kernels = [g for g in gaps if g["is_delegated_op"] == "True"]
    assert kernels
    for row in kernels:
        handles = json.loads(row["debug_handles"])
        expected = [n for h in handles for n in names[h]]
        assert json.loads(row["op_names"]) == expected
    assert any(len(json.loads(r["op_names"])) > 1 for r in kernels), "no fused kernel row"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", MODELS)
def test_faulted_kernel_is_the_first_divergence(
    run_tiny: RunTiny, model: str, backend: str
) -> None:
    node = FAULTED_NODE[model]
    run_dir = run_tiny(
        f"fault-{model}-{backend}", model, f"backend={backend}", f"backend.fault.node={node}"
    )
    summary = read_summary(run_dir)
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail"
    assert first is not None and node in first["op_names"], first
    assert first["source_line"] and first["module_hierarchy"] is not None
    assert first["local_gap"] < summary["threshold"]


def test_fault_on_a_portable_operator_is_found(run_tiny: RunTiny) -> None:
    run_dir = run_tiny(
        "fault-op",
        "llm",
        "backend=xnnpack",
        "backend.fault.node=rsqrt",
        "backend.fault.kind=offset",
    )
    first = read_summary(run_dir)["first_divergence"]
    assert first is not None and first["op_names"] == ["rsqrt"], first
    assert first["delegate_backend_name"] == ""


def test_events_csv_trace_and_headline_metrics(run_tiny: RunTiny) -> None:
    run_dir = run_tiny("clean-vit-xnnpack", "vit", "backend=xnnpack")
    events = _rows(run_dir / "events.csv")
    assert tuple(events[0]) == EVENT_COLUMNS
    delegated = [e for e in events if e["is_delegated_op"] == "True"]
    assert delegated and all(json.loads(e["debug_handles"]) for e in delegated)
    assert all(e["delegate_backend_name"] == "xnnpack" for e in delegated)
    timed = [e for e in events if e["event_block_name"] == "Execute"]
    assert all(int(e["count"]) == 10 for e in timed)  # runtime.iterations
    for e in timed:
        assert (
            float(e["min"])
            <= float(e["p10"])
            <= float(e["p50"])
            <= float(e["p90"])
            <= float(e["max"])
        )
    trace = json.loads((run_dir / "trace.json").read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert "operators" in lanes and any(lane.startswith("xnnpack partition") for lane in lanes)
    assert all(e["dur"] >= 0 and "debug_handles" in e["args"] for e in slices)
    assert any("gap_snr" in e["args"] for e in slices)
    dump = read_etdump(run_dir / "etdump.etdp")
    profiled = [
        (block.name, ev.profile_event.name)
        for block in dump.run_data
        for ev in block.events
        if ev.profile_event is not None and ev.profile_event.name not in STAMP_EVENTS
    ]
    assert [(e["args"]["event_block"], e["args"]["event_name"]) for e in slices] == profiled
    assert min(e["ts"] for e in slices) == 0
    summary = read_summary(run_dir)
    assert 0 < summary["delegated_time_share"] <= 1
    assert summary["latency_p50_ms"] > 0 and summary["partitions"] >= 1
    assert len(summary["slowest_ops"]) == 10


def test_qnn_cycles_are_converted_with_its_clock(run_tiny: RunTiny) -> None:
    run_dir = run_tiny("clean-vit-qnn", "vit", "backend=qnn")
    events = _rows(run_dir / "events.csv")
    kernels = [
        e for e in events if e["delegate_backend_name"] == "qnn" and e["is_delegated_op"] == "True"
    ]
    meta = json.loads(kernels[0]["delegate_debug_metadatas"])[0]
    # post-time cycles at 1.4e6 ticks per ms, and the backend's parser decoded the metadata
    assert float(kernels[0]["p50"]) == pytest.approx(meta["cycles"] / 1.4e6)
    assert meta["kernel"] == kernels[0]["event_name"]


def test_etdump_of_another_program_is_refused(run_tiny: RunTiny, tmp_path: Path) -> None:
    vit = run_tiny("clean-vit-xnnpack", "vit", "backend=xnnpack")
    mlp = run_tiny("clean-mlp-xnnpack", "mlp", "backend=xnnpack")
    with pytest.raises(ProgramMismatchError, match="lowered program"):
        run_analyze(AnalyzeConfig(), vit / "etdump.etdp", None, mlp / "etrecord.zip", tmp_path)
    # Without the fingerprint event (e.g. another tool's ETDump) the structure still gives it away.
    dump = read_etdump(vit / "etdump.etdp")
    dump.run_data = [b for b in dump.run_data if b.name != FINGERPRINT_EVENT]
    for block in dump.run_data:
        block.allocators = [a for a in block.allocators if not a.startswith(FINGERPRINT_EVENT)]
        block.events = [
            e
            for e in block.events
            if e.profile_event is None or e.profile_event.name != FINGERPRINT_EVENT
        ]
    stripped = tmp_path / "stripped.etdp"
    write_etdump(stripped, dump)
    with pytest.raises(ProgramMismatchError, match="does not have"):
        run_analyze(AnalyzeConfig(), stripped, None, mlp / "etrecord.zip", tmp_path)


def test_same_model_other_backend_is_refused(run_tiny: RunTiny, tmp_path: Path) -> None:
    xnn = run_tiny("clean-vit-xnnpack", "vit", "backend=xnnpack")
    qnn = run_tiny("clean-vit-qnn", "vit", "backend=qnn")
    with pytest.raises(ProgramMismatchError):
        run_analyze(AnalyzeConfig(), qnn / "etdump.etdp", None, xnn / "etrecord.zip", tmp_path)


@pytest.mark.parametrize("name", ["etdump_1run.etdp", "etdump_1run_debug.etdp"])
def test_executorch_etdump_without_etrecord(name: str, tmp_path: Path) -> None:
    artifacts = run_analyze(AnalyzeConfig(), executorch_fixtures() / name, None, None, tmp_path)
    summary = read_summary(tmp_path)
    assert summary["verdict"] == "not_evaluated" and "no ETRecord" in summary["verdict_reason"]
    events = _rows(artifacts.events)
    names = {e["event_name"] for e in events}
    assert "DELEGATE_CALL" in names and "Method::execute" in names
    assert any(n.startswith("Fully Connected (NC, F32)") for n in names)
    assert summary["latency_p50_ms"] > 0
    json.loads(artifacts.trace.read_text())
    assert artifacts.report.read_text().count("<img") == len(artifacts.plots)


def test_bring_your_own_etdump_from_the_cli(run_tiny: RunTiny, tmp_path: Path) -> None:
    source = run_tiny("clean-mlp-xnnpack", "mlp", "backend=xnnpack")
    run_dir = run_tiny(
        "byo",
        "mlp",
        "stages=[analyze]",
        f"analyze.etdump={source / 'etdump.etdp'}",
        f"analyze.etrecord={source / 'etrecord.zip'}",
        f"analyze.debug_buffer={source / 'debug.bin'}",
    )
    summary = read_summary(run_dir)
    assert summary["verdict"] == "pass" and summary["compared_outputs"] > 0
    assert summary["etdump"] == str(source / "etdump.etdp")


def test_custom_metadata_parser_and_bad_options(run_tiny: RunTiny, tmp_path: Path) -> None:
    source = run_tiny("clean-vit-qnn", "vit", "backend=qnn")
    args = (source / "etdump.etdp", source / "debug.bin", source / "etrecord.zip", tmp_path)
    cfg = AnalyzeConfig(
        delegate_metadata_parser={"_target_": "binascii.hexlify"}, comparators=["snr"]
    )
    with pytest.raises(MetadataParserError, match=r"hexlify.*returned bytes, not a dict"):
        run_analyze(cfg, *args)  # hexlify returns bytes, not a dict: refused by name
    cfg = AnalyzeConfig(
        delegate_metadata_parser={
            "_target_": "stages.backends.qnn.QnnBackend.parse_delegate_metadata"
        }
    )
    run_analyze(cfg, *args)
    with pytest.raises(TimeUnitError, match=r"analyze.time_unit='minutes'"):
        run_analyze(AnalyzeConfig(time_unit="minutes"), *args)
    with pytest.raises(VerdictConfigError, match=r"analyze.gap_metric='psnr'"):
        run_analyze(AnalyzeConfig(gap_metric="psnr"), *args)
    with pytest.raises(VerdictConfigError, match=r"analyze.thresholds.fp16"):
        run_analyze(AnalyzeConfig(thresholds={"fp32": 60.0}), *args)


def test_multi_output_ops_compare_each_output(run_tiny: RunTiny) -> None:
    run_dir = run_tiny("clean-topk-portable", "topk_model", "backend=portable")
    rows = _rows(run_dir / "numeric_gap.csv")
    topk = [r for r in rows if "aten.topk.default" in json.loads(r["op_types"])]
    assert sorted(int(r["output_index"]) for r in topk) == [0, 1]
    assert all(r["status"] == "ok" for r in topk)
    assert read_summary(run_dir)["verdict"] == "pass"


def test_cond_branch_ops_and_the_cond_are_compared(run_tiny: RunTiny) -> None:
    run_dir = run_tiny("clean-cond-xnnpack", "cond_model", "backend=xnnpack")
    summary = read_summary(run_dir)
    assert summary["verdict"] == "pass"
    rows = _rows(run_dir / "numeric_gap.csv")
    assert {r["status"] for r in rows} == {"ok"}
    assert any(json.loads(r["op_names"]) == ["cond"] for r in rows)


def test_a_wrongly_shaped_runtime_output_is_a_mismatch_row_not_a_crash(run_tiny: RunTiny) -> None:
    run_dir = run_tiny("clean-mlp-xnnpack", "mlp", "backend=xnnpack")
    record = load_etrecord(run_dir / "etrecord.zip")
    index = ProgramIndex.from_etrecord(record)
    outputs = runtime_outputs(
        read_etdump(run_dir / "etdump.etdp"), (run_dir / "debug.bin").read_bytes(), index
    )
    broken = dataclasses.replace(outputs[1], value=outputs[1].value.flatten()[:3])  # wrong shape
    outputs = [outputs[0], broken, *outputs[2:]]
    comparators = build_comparators(["snr"], None)
    _, rows = compute_numeric_gap(
        outputs, etrecord_program(record), record.representative_inputs, comparators
    )
    bad = [r for r in rows if r.status == "shape_mismatch"]
    assert len(bad) == 1 and bad[0].handles == broken.link.debug_handles
    verdict = decide(rows, comparators[0], 60.0, True)
    assert verdict.status == "fail" and verdict.first_divergence is bad[0]


def test_terminal_report_names_the_divergence_or_says_all_exact(run_tiny: RunTiny) -> None:
    clean_dir = run_tiny("clean-vit-xnnpack", "vit", "backend=xnnpack")
    text = format_terminal_report(clean_dir / "summary.json")
    compared = read_summary(clean_dir)["compared_outputs"]
    assert "verdict PASS" in text and f"all {compared} float outputs are exact" in text
    fault_dir = run_tiny("fault-vit-qnn", "vit", "backend=qnn", "backend.fault.node=linear_1")
    text = format_terminal_report(fault_dir / "summary.json")
    assert "verdict FAIL" in text and "first divergence: linear_1" in text
    assert "slowest ops" in text and "largest gaps" in text and "at zoo/vit.py:" in text


def test_accuracy_scope_gives_the_accuracy_without_per_op_gaps_or_plots(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    """analyze.scope=accuracy (a precision search's trials): the same end-to-end accuracy as the
    full analysis of the same files, the verdict not evaluated and saying why, no gap rows and
    no plots; events are still timed."""
    from stages.analyze.config import AnalyzeScope

    run_dir = run_tiny("int8-mlp-xnnpack", "mlp", "backend=xnnpack", "backend.precision=int8")
    full = read_summary(run_dir)
    files = (run_dir / "etdump.etdp", run_dir / "debug.bin", run_dir / "etrecord.zip")
    cfg = dataclasses.replace(AnalyzeConfig(), scope=AnalyzeScope.accuracy)
    artifacts = run_analyze(cfg, *files, tmp_path)
    summary = json.loads(artifacts.summary.read_text())
    assert full["verdict"] == "pass" and full["compared_outputs"] > 0
    assert summary["verdict"] == "not_evaluated"
    assert "analyze.scope=accuracy" in json.dumps(summary["not_evaluated"])
    assert summary["accuracy"] == full["accuracy"]
    assert artifacts.plots == () and not list(tmp_path.glob("*.svg"))
    assert _rows(artifacts.numeric_gap) == [] and _rows(artifacts.events)


def test_verdict_scope_keeps_the_gaps_and_verdict_without_plots(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    """analyze.scope=verdict (a delegation search's trials): the full analysis's verdict, first
    divergence and gap rows from the same files, without plots."""
    from stages.analyze.config import AnalyzeScope

    run_dir = run_tiny("fault-mlp-qnn", "mlp", "backend=qnn", "backend.fault.node=linear_1")
    full = read_summary(run_dir)
    files = (run_dir / "etdump.etdp", run_dir / "debug.bin", run_dir / "etrecord.zip")
    cfg = dataclasses.replace(AnalyzeConfig(), scope=AnalyzeScope.verdict)
    artifacts = run_analyze(cfg, *files, tmp_path)
    summary = json.loads(artifacts.summary.read_text())
    assert full["verdict"] == "fail" and summary["verdict"] == "fail"
    assert summary["first_divergence"]["op_names"] == full["first_divergence"]["op_names"]
    assert _rows(artifacts.numeric_gap) == _rows(run_dir / "numeric_gap.csv")
    assert artifacts.plots == () and not list(tmp_path.glob("*.svg"))
    assert list(run_dir.glob("*.svg"))  # the full analysis has them
