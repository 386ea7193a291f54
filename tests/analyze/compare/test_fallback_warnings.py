"""Forty outputs whose expected error fell back to the precision's floor are one warning line on
the terminal (how many, their distinct reasons), while the log file keeps a line per output and
the rows keep their reason for summary.json (`expected_fallback`). Issue 44: a search printed
~40 such warnings per trial."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from pipeline.tracking.dependency_logs import LogFileOnly
from stages.analyze.compare.comparators import SNR
from stages.analyze.compare.expected_error import PrecisionEmulation
from stages.analyze.compare.gap.groups import GapGroup
from stages.analyze.compare.gap.rows import Slot, build_rows, say_fallbacks

REASONS = ("OpEncodingError: <built-in function getitem> is not an ATen op overload", "boom")


@pytest.fixture
def terminal_and_log_file(tmp_path: Path) -> Iterator[tuple[io.StringIO, Path]]:
    """The root logger as a pipeline run sets it up: a terminal handler and the run's log file,
    dependency noise and our per-item details kept off the terminal."""
    root, terminal, log_file = logging.getLogger(), io.StringIO(), tmp_path / "run.log"
    handlers: list[logging.Handler] = [
        logging.StreamHandler(terminal),
        logging.FileHandler(log_file),
    ]
    handlers[0].addFilter(LogFileOnly())  # as keep_dependency_noise_in_log_files does
    level = root.level
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield terminal, log_file
    finally:
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)


def test_forty_fallbacks_are_one_terminal_line_and_forty_log_file_lines(
    terminal_and_log_file: tuple[io.StringIO, Path],
) -> None:
    terminal, log_file = terminal_and_log_file
    torch.manual_seed(0)
    groups, slots = [], {}
    for index in range(40):
        groups.append(GapGroup((index + 1,), None, [], is_delegated=True))
        value = torch.randn(4, 4)
        slots[(index, 0)] = Slot(
            rt=[value + 1e-3], ref=[value], loc=[value], exp_failed=REASONS[index % 2]
        )
    rows = build_rows(groups, {}, slots, [SNR()], 0.0, PrecisionEmulation("int8"), 1.0)
    say_fallbacks(rows, "int8")
    assert [r.expected_fallback for r in rows] == [REASONS[i % 2] for i in range(40)]
    shown = [line for line in terminal.getvalue().splitlines() if "could not be computed" in line]
    assert len(shown) == 1, terminal.getvalue()
    assert "40 output(s) at int8" in shown[0] and REASONS[0] in shown[0] and "boom" in shown[0]
    logged = log_file.read_text()
    assert logged.count("could not be computed, so the verdict does not judge it") == 40
    assert "the expected error of [7] at int8" in logged  # each output named in the log file


def test_no_fallback_says_nothing(terminal_and_log_file: tuple[io.StringIO, Path]) -> None:
    terminal, _ = terminal_and_log_file
    say_fallbacks([], "int8")
    assert terminal.getvalue() == ""
