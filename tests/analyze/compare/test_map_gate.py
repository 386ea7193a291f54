"""Map errors decide the gate: PASS becomes map_errors naming the unverified ops, FAIL stays a
FAIL that says the map may explain it, warnings change nothing, `warn` keeps the verdict."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stages.analyze.compare.map_gate import MAP_ERRORS, gate_on_map_errors
from stages.analyze.link.linking import ProgramIndex
from stages.formats.etrecord_types import DelegateMapRecord
from stages.handles.handle_info import HandleInfo

MAP = DelegateMapRecord(0, "npu", {"k0": (1,), "k1": (3,)}, (1, 2, 3))
INDEX = replace(
    ProgramIndex.empty(),
    handles={
        h: HandleInfo((name,), ("aten.x",), ("",), ("",))
        for h, name in ((1, "linear"), (2, "relu"), (3, "linear_1"))
    },
    maps=(MAP,),
)
UNCOVERED = {
    "kind": "uncovered_handles",
    "severity": "error",
    "partition_id": 0,
    "ops": ["relu"],
    "not_comparable": ["k0"],
}
CLOCK = {"kind": "clock_mismatch", "severity": "error", "partition_id": 0, "ops": []}
SHARED = {"kind": "shared_handles", "severity": "warning", "partition_id": 0, "ops": ["relu"]}


def _summary(verdict: str, *findings: dict[str, Any]) -> dict[str, Any]:
    return {
        "verdict": verdict,
        "verdict_reason": "6 outputs compared",
        "delegate_map_check": list(findings),
    }


def test_a_pass_with_map_errors_is_map_errors_naming_what_went_unverified() -> None:
    summary = _summary("pass", UNCOVERED, CLOCK, SHARED)
    gate_on_map_errors(summary, INDEX, "gate")
    assert summary["verdict"] == MAP_ERRORS and summary["numeric_verdict"] == "pass"
    assert summary["unverified_ops"] == [
        {
            "kind": "uncovered_handles",
            "partition_id": 0,
            "ops": ["relu", "linear"],
            "what": "numeric gap",
        },
        {"kind": "clock_mismatch", "partition_id": 0, "ops": [], "what": "kernel timings"},
    ]
    reason = summary["verdict_reason"]
    assert "partition 0 uncovered_handles: relu, linear" in reason
    assert "partition 0 clock_mismatch: its kernel timings" in reason
    assert "6 outputs compared" in reason and "analyze.map_errors=warn" in reason


def test_warnings_alone_leave_a_pass_alone() -> None:
    summary = _summary("pass", SHARED)
    gate_on_map_errors(summary, INDEX, "gate")
    assert summary == _summary("pass", SHARED)


def test_a_fail_stays_a_fail_and_says_the_map_may_explain_it() -> None:
    summary = _summary("fail", UNCOVERED)
    gate_on_map_errors(summary, INDEX, "gate")
    assert summary["verdict"] == "fail"
    assert summary["verdict_reason"].startswith("6 outputs compared; the delegate map check")


def test_warn_keeps_the_verdict_and_still_lists_the_unverified_ops() -> None:
    summary = _summary("pass", UNCOVERED)
    gate_on_map_errors(summary, INDEX, "warn")
    assert summary["verdict"] == "pass" and summary["verdict_reason"] == "6 outputs compared"
    assert summary["unverified_ops"][0]["ops"] == ["relu", "linear"]
