"""ExecuTorch's own ETRecord, ETDump and debug buffer analysed, and checked against its Inspector.

The files are written here by ExecuTorch 1.5.1 (a model with two XNNPACK partitions and two
layer norms left to the portable runtime), then analysed through the CLI, then opened with
ExecuTorch's Inspector: the same events and timings, the same op names per debug handle, and
numeric gaps that agree with `Inspector.calculate_numeric_gap` for MSE, L1 (a sum) and SNR.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import sqlite3
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from stages.handover.etrecord import load_etrecord
from tests.helpers.cli_runner import run_module
from tests.helpers.inspector_times import inspector_ms_tolerance

SKIP_REASON = "needs the executorch extra: pip install -e '.[executorch]'"
pytestmark = pytest.mark.executorch


@pytest.fixture(scope="module")
def et_files(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("executorch.devtools", reason=SKIP_REASON)
    from tests.helpers.executorch_artifacts import write_executorch_files

    return write_executorch_files(tmp_path_factory.mktemp("executorch_files"))


@pytest.fixture(scope="module")
def analysed(et_files: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The analyze stage run through the CLI on ExecuTorch's files, logging to MLflow."""
    work = tmp_path_factory.mktemp("analyze_executorch")
    run_dir = work / "run"
    done = run_module(
        "pipeline",
        "stages=[analyze]",
        f"analyze.etdump={et_files.etdump}",
        f"analyze.etrecord={et_files.etrecord}",
        f"analyze.debug_buffer={et_files.debug_buffer}",
        "analyze.comparators=[mse,l1,snr,mean_abs]",
        f"hydra.run.dir={run_dir}",
        cwd=work,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def _inspector(et_files: Any) -> Any:
    from executorch.devtools import Inspector

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(
            etdump_path=str(et_files.etdump),
            etrecord=str(et_files.etrecord),
            debug_buffer_path=str(et_files.debug_buffer),
        )


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_events_timings_and_op_names_match_executorch_inspector(
    et_files: Any, analysed: Path
) -> None:
    inspector = _inspector(et_files)
    theirs = [(b.name, e) for b in inspector.event_blocks for e in b.events]
    ours = _rows(analysed / "events.csv")
    assert len(ours) == len(theirs) == 13
    for row, (block, event) in zip(ours, theirs, strict=True):
        assert (row["event_block_name"], row["event_name"]) == (block, event.name)
        assert int(row["count"]) == len(event.perf_data.raw)
        tolerance = inspector_ms_tolerance(event)
        assert float(row["p50"]) == pytest.approx(event.perf_data.p50, rel=1e-6, abs=tolerance)
        assert float(row["max"]) == pytest.approx(event.perf_data.max, rel=1e-6, abs=tolerance)
        if event.name in ("Method::init", "Program::load_method", "Method::execute"):
            assert json.loads(row["debug_handles"]) == []  # framework events stand for no op
            continue
        handles = event.debug_handles
        handles = [handles] if isinstance(handles, int) else list(handles or [])
        assert json.loads(row["debug_handles"]) == handles
        # op types: ours are the ATen program's (aten.layer_norm), Inspector's the edge one's
        assert len(json.loads(row["op_types"])) == len(event.op_types)
        assert row["is_delegated_op"] == str(event.is_delegated_op)
        assert (row["delegate_backend_name"] or None) == event.delegate_backend_name
    # operator and delegate-call events name the ops of the ATen program, with their source
    linked = [r for r in ours if json.loads(r["debug_handles"])]
    assert {r["event_name"] for r in linked} == {
        "DELEGATE_CALL",
        "native_call_native_layer_norm.out",
        "OPERATOR_CALL",
    }
    assert all("executorch_artifacts.py" in r["stack_traces"] for r in linked)
    assert {m for r in linked for m in json.loads(r["module_hierarchy"])} >= {"fc1", "norm"}


def test_numeric_gaps_agree_with_calculate_numeric_gap(et_files: Any, analysed: Path) -> None:
    inspector = _inspector(et_files)
    gaps = {tuple(json.loads(r["debug_handles"])): r for r in _rows(analysed / "numeric_gap.csv")}
    for metric, column in (("MSE", "mse"), ("SNR", "snr"), ("L1", "l1")):
        frame = inspector.calculate_numeric_gap(metric)
        assert len(frame) == len(gaps) == 4
        for _, theirs in frame.iterrows():
            ours = gaps[tuple(theirs["aot_debug_handle"])]
            assert json.loads(ours["op_names"]) == list(theirs["aot_ops"])
            assert ours["status"] == "ok"
            (expected,) = theirs["gap"]
            got = float(ours[column])
            if metric == "SNR":
                assert got == pytest.approx(expected, abs=0.05)
                assert got > 100  # fp32 XNNPACK against the ATen reference
            else:
                assert got == pytest.approx(expected, rel=1e-3, abs=1e-12)
    mean_abs = [float(r["mean_abs"]) for r in gaps.values()]
    l1 = [float(r["l1"]) for r in gaps.values()]
    assert all(m <= s for m, s in zip(mean_abs, l1, strict=True)) and any(
        m < s for m, s in zip(mean_abs, l1, strict=True)
    )


def test_verdict_report_trace_plots_and_mlflow(analysed: Path) -> None:
    summary = json.loads((analysed / "summary.json").read_text())
    assert summary["verdict"] == "pass"
    assert summary["compared_outputs"] == 4
    assert summary["backend"] == "XnnpackBackend"
    assert summary["program_identity"]["status"] == "unproven"
    assert summary["program_identity"]["shape_or_dtype_mismatches"] == 0
    for name in ("report.html", "trace.json", "top_ops_p50.svg", "numeric_gap.svg"):
        assert (analysed / name).stat().st_size > 0, name
    trace = json.loads((analysed / "trace.json").read_text())
    assert any("layer_norm" in json.dumps(e) for e in trace["traceEvents"])
    store = analysed.parent / "outputs" / "mlflow.db"
    with sqlite3.connect(store) as db:
        metrics = dict(db.execute("select key, value from metrics").fetchall())
    assert metrics["analyze.verdict_pass"] == 1.0
    assert metrics["analyze.compared_outputs"] == 4.0
    assert not math.isnan(metrics["analyze.max_gap"])


def test_without_the_extra_the_error_names_it(
    et_files: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stages.formats.etrecord import ETRecordError

    monkeypatch.setitem(sys.modules, "executorch.devtools", None)  # import now fails
    with pytest.raises(
        ETRecordError, match=r"ExecuTorch's ETRecord.*pip install -e '\.\[executorch\]'"
    ):
        load_etrecord(et_files.etrecord)


def test_etrecord_without_representative_inputs_is_named(
    et_files: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from stages.analyze.config import AnalyzeConfig
    from stages.analyze.stage import run_analyze

    # an earlier logging.config call in this process (dictConfig disables existing loggers)
    # must not hide the warning this test is about
    logging.getLogger("stages.analyze.load.unused_inputs").disabled = False
    with caplog.at_level(logging.WARNING, logger="stages.analyze"):
        run_analyze(
            AnalyzeConfig(),
            et_files.etdump,
            et_files.debug_buffer,
            et_files.etrecord_without_inputs,
            tmp_path,
        )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["verdict"] == "not_evaluated"
    (item,) = summary["not_evaluated"]
    assert item["option"] == "analyze.etrecord" and "representative inputs" in item["why"]
    assert any("analyze.etrecord not used" in r.getMessage() for r in caplog.records)
    # events still link through it
    with (tmp_path / "events.csv").open() as fh:
        assert any(json.loads(r["op_names"]) for r in csv.DictReader(fh))
