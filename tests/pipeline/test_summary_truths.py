"""What the end-of-run summary and the stage log lines say is true of the run just made."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict

from pipeline.runner import run_pipeline
from pipeline.terminal_summary import format_summary


def _run_in(cfg: DictConfig, run_dir: Path) -> str:
    with open_dict(cfg):
        cfg.run_dir = str(run_dir)
    return format_summary(run_pipeline(cfg, print_summary=False))


def test_rerun_summary_points_report_and_artifacts_at_the_new_run_dir(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    _run_in(tiny_cfg("mlp", "tracking=none"), tmp_path / "first")
    text = _run_in(tiny_cfg("mlp", "tracking=none"), tmp_path / "second")  # every stage reused
    assert "reused" in text
    report = next(line for line in text.splitlines() if line.startswith("report: "))
    assert report == f"report: {tmp_path / 'second' / 'report.html'}"
    assert f"artifacts: {tmp_path / 'second'}" in text


def test_cache_false_says_why_each_stage_ran(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="pipeline"):
        _run_in(tiny_cfg("mlp", "tracking=none", "cache=false"), tmp_path / "run")
    done = [r.getMessage() for r in caplog.records if "] done in " in r.getMessage()]
    assert len(done) == 4 and all("(ran: cache=false, nothing is reused)" in m for m in done), done
