""" "largest gaps" keeps the group that diverged first, and op names that read like statistics
(an op named `mean`) are shown with their op."""

from __future__ import annotations

import json
from pathlib import Path

from stages.analyze.compare.numeric_gap import GapRow
from stages.analyze.compare.verdict import FAIL, Verdict
from stages.analyze.report.summary import largest_gaps
from stages.analyze.report.terminal_report import format_terminal_report


def _gap(group: int, snr: float, name: str = "linear", kind: str = "aten.linear.default") -> dict:
    return {"group": group, "snr": snr, "op_names": [name], "op_types": [kind], "diverged": True}


def _verdict(first_group: int) -> Verdict:
    row = GapRow(first_group, first_group, 0, (first_group,), [], "", False, "ok")
    return Verdict(FAIL, "snr", 60.0, True, row, 4, "4 output(s) cross the threshold")


def test_the_diverged_group_is_kept_among_the_top_rows() -> None:
    # Group 0 diverged at 40 dB; the ops downstream of it accumulate more error.
    gaps = [_gap(0, 40.0), _gap(1, 20.0), _gap(2, 10.0), _gap(3, 5.0)]
    top = largest_gaps(gaps, _verdict(0), 2)
    assert [g["group"] for g in top] == [3, 0]
    assert [g["group"] for g in largest_gaps(gaps, _verdict(3), 2)] == [3, 2]  # already in


def test_a_statistic_named_op_is_shown_with_its_op_and_the_first_divergence_marked(
    tmp_path: Path,
) -> None:
    summary = {
        "verdict": "fail",
        "gap_metric": "snr",
        "largest_gaps": [_gap(3, 5.0, "mean", "aten.mean.dim"), _gap(0, 40.0)],
        "first_divergence": {"group": 0, "op_names": ["linear"], "debug_handles": [1]},
    }
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    text = format_terminal_report(path)
    rows = text.splitlines()
    assert any(r.startswith("mean (aten.mean.dim)") for r in rows)
    assert any(r.startswith("linear") and r.endswith("<- first divergence") for r in rows)
