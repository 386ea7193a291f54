"""The analysis checks what the runtime logged against the delegate maps, survives map bugs and
never misplaces blame: one backend of the tests' own per map bug (tests/helpers/map_bug_backends)."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from stages.analyze.config import AnalyzeConfig
from stages.analyze.report.terminal_report import format_terminal_report
from stages.analyze.stage import run_analyze
from stages.closed_sets import MapFindingKind
from stages.formats.etdump import read_etdump, write_etdump
from stages.formats.etdump.records import FINGERPRINT_EVENT
from stages.handover.etrecord import load_etrecord
from tests.helpers.analyze_runs import RunTiny, read_summary
from tests.helpers.map_bug_backends import RENUMBERED, UNKNOWN_HANDLE

BUGS = "tests.helpers.map_bug_backends"
MLP_OPS = ["linear", "relu", "linear_1", "relu_1", "add", "linear_2"]
ANOTHER_PROGRAM = "another program"


def _run(run_tiny: RunTiny, backend: str, *more: str, model: str = "mlp") -> Path:
    label = f"map-{model}-{backend}-{'-'.join(more) or 'clean'}".replace("=", "_")
    return run_tiny(
        label,
        model,
        "backend=xnnpack",
        f"backend._target_={BUGS}.{backend}",
        *more,
    )


def _handles(run_dir: Path) -> dict[str, int]:
    """Op name → debug handle, from the run's ETRecord."""
    record = load_etrecord(run_dir / "etrecord.zip")
    return {name: h for h, info in record.handles.items() for name in info.op_names}


def _findings(summary: dict[str, Any], kind: MapFindingKind) -> list[dict[str, Any]]:
    return [f for f in summary["delegate_map_check"] if f["kind"] == kind.value]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def _gap_handles(run_dir: Path) -> list[list[int]]:
    return [json.loads(r["debug_handles"]) for r in _rows(run_dir / "numeric_gap.csv")]


def _no_other_program(run_dir: Path) -> None:
    assert ANOTHER_PROGRAM not in (run_dir / "summary.json").read_text()
    assert read_summary(run_dir)["program_identity"]["status"] == "proven"


def test_empty_map_still_catches_a_wrong_kernel(run_tiny: RunTiny) -> None:
    clean = read_summary(_run(run_tiny, "EmptyMapBackend"))
    (finding,) = _findings(clean, MapFindingKind.empty_map)
    assert finding["partition_id"] == 0 and finding["severity"] == "error"
    assert finding["ops"] == MLP_OPS
    # Compared as a whole partition, and exact; the map error keeps it from passing.
    assert clean["verdict"] == "map_errors" and clean["numeric_verdict"] == "pass"
    assert clean["unverified_ops"][0]["ops"] == MLP_OPS

    run_dir = _run(run_tiny, "EmptyMapBackend", "backend.fault.node=linear_1")
    summary = read_summary(run_dir)
    assert summary["verdict"] == "fail"  # not NOT_EVALUATED: the bug is not missed
    first = summary["first_divergence"]
    assert first["partition_id"] == 0 and first["op_names"] == MLP_OPS
    assert first["narrowed"] is False and "could not be narrowed further" in first["note"]
    assert "runtime.observe=bisect narrows it" in first["note"]  # what to do next
    assert any("inside partition 0" in n["what"] for n in summary["not_evaluated"])
    assert summary["delegate_map_check"] == clean["delegate_map_check"]
    terminal = format_terminal_report(run_dir / "summary.json")
    assert "could not be narrowed further" in terminal
    assert "delegate map check: empty_map (error)" in terminal
    _no_other_program(run_dir)


def test_fused_kernel_mapping_only_its_first_op_is_not_blamed(run_tiny: RunTiny) -> None:
    run_dir = _run(run_tiny, "FirstOpOnlyBackend")
    summary = read_summary(run_dir)
    handles = _handles(run_dir)
    (finding,) = _findings(summary, MapFindingKind.uncovered_handles)
    assert finding["debug_handles"] == [handles["relu"], handles["relu_1"], handles["add"]]
    assert finding["identifiers"] == [0, 1] and finding["partition_id"] == 0
    # Every kernel is exact: no FAIL on `linear` for the relu's output, and no plain PASS.
    assert summary["verdict"] == "map_errors", summary["first_divergence"]
    assert summary["numeric_verdict"] == "pass"
    assert [handles["linear"]] not in _gap_handles(run_dir)
    assert any("identifiers [0, 1]" in n["what"] for n in summary["not_evaluated"])


def test_fused_first_op_map_with_a_wrong_kernel_names_the_unobserved_ops(
    run_tiny: RunTiny,
) -> None:
    """The faulted kernel's output is not comparable; the next observed op is not blamed alone."""
    summary = read_summary(_run(run_tiny, "FirstOpOnlyBackend", "backend.fault.node=linear"))
    assert summary["verdict"] == "fail"
    first = summary["first_divergence"]
    assert first["narrowed"] is False
    assert first["unobserved_inputs"][0] == "linear" and "add" in first["unobserved_inputs"]


def test_handle_not_in_the_graph_is_flagged_and_blame_stays_right(run_tiny: RunTiny) -> None:
    clean_dir = _run(run_tiny, "UnknownHandleBackend")
    clean = read_summary(clean_dir)
    (finding,) = _findings(clean, MapFindingKind.unknown_handles)
    assert (finding["identifiers"], finding["debug_handles"]) == ([0], [UNKNOWN_HANDLE])
    assert clean["verdict"] == "map_errors" and clean["numeric_verdict"] == "pass"
    assert clean["unverified_ops"][0]["ops"] == []  # every op compared: only the map is wrong
    assert all(UNKNOWN_HANDLE not in h for h in _gap_handles(clean_dir))

    run_dir = _run(run_tiny, "UnknownHandleBackend", "backend.fault.node=linear")
    first = read_summary(run_dir)["first_divergence"]
    handles = _handles(run_dir)
    assert first["debug_handles"] == [handles["linear"], handles["relu"]]
    assert first["delegate_debug_identifiers"] == [0]


def test_missing_entry_is_analysed_not_called_another_program(run_tiny: RunTiny) -> None:
    run_dir = _run(run_tiny, "MissingEntryBackend")
    summary = read_summary(run_dir)
    handles = _handles(run_dir)
    (unmapped,) = _findings(summary, MapFindingKind.unmapped_identifier)
    assert unmapped["partition_id"] == 0 and unmapped["identifiers"] == [2]
    assert unmapped["debug_handles"] == [handles["linear_2"]]  # what no identifier covers
    assert unmapped["ops"] == ["linear_2"]
    assert unmapped["stage"] == "analyze" and unmapped["severity"] == "error"
    _no_other_program(run_dir)
    # Events and timings of the unmapped kernel are kept, under its delegate call.
    events = _rows(run_dir / "events.csv")
    kernel = [e for e in events if e["delegate_debug_identifier"] == "2"]
    assert kernel and all(e["debug_handles"] == "[]" for e in kernel)
    assert summary["latency_p50_ms"] is not None
    # Gaps where they can be linked (the first kernel); the rest is in not_evaluated.
    assert [handles["linear"], handles["relu"]] in _gap_handles(run_dir)
    assert summary["verdict"] == "map_errors" and summary["numeric_verdict"] == "pass"
    assert "linear_2" in summary["unverified_ops"][0]["ops"]
    whats = " ".join(n["what"] for n in summary["not_evaluated"])
    assert "identifiers [1]" in whats and "identifiers [2]" in whats


def test_identifier_logged_at_run_time_that_the_map_lacks(run_tiny: RunTiny) -> None:
    run_dir = _run(run_tiny, "StaleIdentifierBackend", "backend.fault.node=linear")
    summary = read_summary(run_dir)
    (unmapped,) = _findings(summary, MapFindingKind.unmapped_identifier)
    assert unmapped["identifiers"] == [RENUMBERED, RENUMBERED + 1, RENUMBERED + 2]
    assert not _findings(summary, MapFindingKind.uncovered_handles)  # the map itself is complete
    _no_other_program(run_dir)
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail" and first["partition_id"] == 0
    assert first["op_names"] == MLP_OPS and first["narrowed"] is False


def test_shared_handles_are_grouped_and_warned(run_tiny: RunTiny) -> None:
    clean = read_summary(_run(run_tiny, "SharedHandleBackend"))
    (finding,) = _findings(clean, MapFindingKind.shared_handles)
    assert finding["severity"] == "warning"
    assert clean["verdict"] == "pass" and clean["not_evaluated"] == []

    run_dir = _run(run_tiny, "SharedHandleBackend", "backend.fault.node=linear")
    handles = _handles(run_dir)
    assert finding["identifiers"] == [f"kernel_{handles['linear']}", f"prepack_{handles['linear']}"]
    first = read_summary(run_dir)["first_divergence"]
    assert first["debug_handles"] == [handles["linear"], handles["relu"]]


@pytest.mark.parametrize(
    ("model", "fault", "partition_ops"),
    [
        ("mlp", "linear", ["linear", "relu", "linear_1", "relu_1"]),
        ("vit", "linear_1", None),
    ],
)
def test_no_intermediate_outputs_blames_the_partition(
    run_tiny: RunTiny,
    caplog: pytest.LogCaptureFixture,
    model: str,
    fault: str,
    partition_ops: list[str] | None,
) -> None:
    """Never a non-delegated op downstream (`add` is left to the CPU by this backend)."""
    with caplog.at_level(logging.WARNING):
        run_dir = _run(run_tiny, "NoOutputsBackend", f"backend.fault.node={fault}", model=model)
    summary = read_summary(run_dir)
    first = summary["first_divergence"]
    assert summary["verdict"] == "fail"
    assert fault in first["op_names"] and first["narrowed"] is False
    assert "could not be narrowed further" in first["note"]
    if partition_ops is not None:
        assert first["op_names"] == partition_ops
        # The CPU `add` re-runs on the partition's two logged outputs: it carries the error
        # without diverging itself.
        (add,) = [
            r for r in _rows(run_dir / "numeric_gap.csv") if json.loads(r["op_names"]) == ["add"]
        ]
        assert add["diverged"] == "False" and add["is_delegated_op"] == "False"
        assert float(add["local_snr"]) > 100 > float(add["snr"])
    silent = _findings(summary, MapFindingKind.no_intermediate_outputs)
    blamed = next(f for f in silent if f["partition_id"] == first["partition_id"])
    assert first["delegate_debug_identifiers"] == blamed["identifiers"]
    assert blamed["debug_handles"] == first["debug_handles"]
    assert summary["not_evaluated"]
    lines = [
        r.getMessage() for r in caplog.records if "[analyze] delegate map check" in r.getMessage()
    ]
    assert len(lines) == 1 and "no_intermediate_outputs" in lines[0]


def test_report_shows_findings_only_when_there_are_some(run_tiny: RunTiny) -> None:
    bug = (_run(run_tiny, "EmptyMapBackend") / "report.html").read_text()
    assert "Delegate debug-handle map check" in bug and "empty_map" in bug
    clean = run_tiny("map-clean-mlp-xnnpack", "mlp", "backend=xnnpack")
    assert read_summary(clean)["delegate_map_check"] == []
    assert "Delegate debug-handle map check" not in (clean / "report.html").read_text()


def test_unmapped_identifier_without_fingerprint_is_not_another_program(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    """Without the fingerprint (another tool's ETDump) the structure is checked: an identifier
    the map lacks, under a delegate call the ETRecord knows, is a finding, not a mismatch."""
    run_dir = _run(run_tiny, "MissingEntryBackend")
    dump = read_etdump(run_dir / "etdump.etdp")
    for block in dump.run_data:
        block.allocators = [a for a in block.allocators if not a.startswith(FINGERPRINT_EVENT)]
    stripped = tmp_path / "stripped.etdp"
    write_etdump(stripped, dump)
    out = tmp_path / "analysis"
    out.mkdir()
    result = run_analyze(AnalyzeConfig(), stripped, None, run_dir / "etrecord.zip", out)
    # uncovered_handles (lower) and unmapped_identifier (analyze), both errors
    assert result.metrics["delegate_map_errors"] == 2.0
    assert result.metrics["delegate_map_warnings"] == 0.0
    summary = read_summary(out)
    assert summary["program_identity"]["status"] == "unproven"
    (unmapped,) = _findings(summary, MapFindingKind.unmapped_identifier)
    assert unmapped["identifiers"] == [2]
    assert ANOTHER_PROGRAM not in (out / "summary.json").read_text()
