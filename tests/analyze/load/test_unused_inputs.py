"""Nothing silently ignored: an unusable debug buffer or ETRecord is named in a warning and in
summary.json's `not_evaluated`, with the reason."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from stages.analyze.config import AnalyzeConfig
from stages.analyze.stage import run_analyze
from tests.helpers.analyze_runs import RunTiny, read_summary


def _analyze(
    caplog: pytest.LogCaptureFixture, out: Path, *files: Path | None
) -> tuple[dict[str, object], list[str]]:
    out.mkdir()
    with caplog.at_level(logging.WARNING, logger="stages.analyze"):
        run_analyze(AnalyzeConfig(), files[0], files[1], files[2], out)  # type: ignore[arg-type]
    return read_summary(out), [r.getMessage() for r in caplog.records]


def test_debug_buffer_without_etrecord_is_named(
    run_tiny: RunTiny, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = run_tiny("xnnpack_mlp", "mlp")
    summary, warned = _analyze(caplog, tmp_path / "a", run / "etdump.etdp", run / "debug.bin", None)
    assert summary["verdict"] == "not_evaluated"
    (item,) = summary["not_evaluated"]  # type: ignore[misc]
    assert item["what"] == "numeric_gap" and item["option"] == "analyze.debug_buffer"
    assert "no ETRecord" in item["why"]
    assert any("analyze.debug_buffer not used" in m and "no ETRecord" in m for m in warned)


def test_etrecord_without_debug_buffer_is_recorded_not_warned(
    run_tiny: RunTiny, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = run_tiny("xnnpack_mlp", "mlp")
    summary, warned = _analyze(
        caplog, tmp_path / "b", run / "etdump.etdp", None, run / "etrecord.zip"
    )
    (item,) = summary["not_evaluated"]  # type: ignore[misc]
    assert item["option"] == "analyze.debug_buffer"
    assert "the ETDump logs" in item["why"]  # it says what the buffer would have given
    assert not [m for m in warned if "not used" in m]  # nothing given went unused


def test_debug_buffer_of_a_run_without_intermediate_outputs(
    run_tiny: RunTiny, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = run_tiny("xnnpack_mlp_no_outputs", "mlp", "runtime.debug_level=none")
    summary, warned = _analyze(
        caplog, tmp_path / "c", run / "etdump.etdp", run / "debug.bin", run / "etrecord.zip"
    )
    assert summary["verdict"] == "not_evaluated"
    (item,) = summary["not_evaluated"]  # type: ignore[misc]
    assert "no intermediate outputs" in item["why"]
    assert any("analyze.debug_buffer not used" in m for m in warned)


def test_a_full_run_evaluates_everything(run_tiny: RunTiny) -> None:
    summary = read_summary(run_tiny("xnnpack_mlp", "mlp"))
    assert summary["not_evaluated"] == [] and summary["verdict"] == "pass"
