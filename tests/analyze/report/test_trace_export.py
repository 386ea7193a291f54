"""trace.json's writer: the text `json` would write for the trace's events, on either pass."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import stages.analyze.report.trace_export as trace_export
from stages.analyze.config import AnalyzeConfig
from stages.analyze.link.linked_files import load_and_link
from stages.analyze.report.trace_export import Trace, build_trace, trace_events, write_trace
from stages.formats.artifacts import ArtifactName
from tests.helpers.analyze_runs import RunTiny


def _trace(run_dir: Path, odd_args: bool) -> Trace:
    linked = load_and_link(
        AnalyzeConfig(),
        run_dir / ArtifactName.ETDUMP,
        None,
        run_dir / ArtifactName.ETRECORD,
    )
    plain = build_trace(linked.inputs.etdump, linked.index, {}, None)
    handles = sorted({tuple(a["debug_handles"]) for _, a in plain.statics if a["debug_handles"]})
    assert len(handles) > 1, "the tiny run links too few events to handles"
    gaps = {h: {"gap_snr": 40.0 + i, "diverged": i == 1} for i, h in enumerate(handles)}
    if odd_args:  # args that name the merged keys: `_trace_event` moves them, so must the text
        gaps[handles[0]] = {"block_index": "mine", "event_block": 7, "label": 'a "quoted" \\ é'}
    return build_trace(linked.inputs.etdump, linked.index, gaps, None)


@pytest.mark.parametrize("keep", [True, False], ids=["slices-kept", "slices-re-read"])
@pytest.mark.parametrize("odd_args", [False, True])
def test_the_written_trace_is_what_json_writes_for_its_events(
    run_tiny: RunTiny,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    keep: bool,
    odd_args: bool,
) -> None:
    if not keep:
        monkeypatch.setattr(trace_export, "KEEP_SLICES", 0)
    monkeypatch.setattr(trace_export, "WRITE_BATCH", 7)  # several batches and a remainder
    trace = _trace(run_tiny("clean-vit-xnnpack", "vit", "backend=xnnpack"), odd_args)
    assert (trace.kept is not None) == keep
    path = tmp_path / "trace.json"
    write_trace(path, trace)
    events = list(trace_events(trace))
    expected = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, allow_nan=False)
    written = path.read_text(encoding="utf-8")
    at = next((i for i, (a, b) in enumerate(zip(written, expected, strict=False)) if a != b), None)
    assert at is None and len(written) == len(expected), (
        f"differs at {at}: {written[at or 0 :][:120]!r} against {expected[at or 0 :][:120]!r}"
    )
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) > 10 and any(e["args"].get("gap_snr") for e in slices)


def test_a_non_finite_slice_time_is_refused_and_nothing_is_written(
    run_tiny: RunTiny, tmp_path: Path
) -> None:
    trace = _trace(run_tiny("clean-vit-xnnpack", "vit", "backend=xnnpack"), False)
    trace.origin = math.inf
    path = tmp_path / "trace.json"
    with pytest.raises(ValueError, match="not finite"):
        write_trace(path, trace)
    assert list(tmp_path.iterdir()) == []
