"""The end-of-run summary's slowest ops say something on every backend (issue 48): through the
real CLI on the tiny ViT, ops that share one p50 (QNN's cost model gives kernels of equal work
one time) are one line naming them, with a line saying what the tie means; on XNNPACK (a
clock) each line is an op. Checked against the run's own events.csv."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from stages.formats.etdump.records import DELEGATE_CALL_EVENT, LOAD_BLOCK, METHOD_EVENT
from tests.helpers.cli_runner import run_module
from tests.helpers.configs import TINY_MODEL_OVERRIDES

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
TOP_K = 10  # analyze.top_k's default
ROW = re.compile(r"^(?P<label>\S.*?)\s+(?P<p50>[0-9.e+-]+|inf|nan)  (?P<backend>\S.*)$")


def _run(tmp_path: Path, backend: str) -> tuple[str, Path]:
    run_dir = tmp_path / backend
    result = run_module(
        "pipeline",
        *TINY_MODEL_OVERRIDES["vit"],
        f"backend={backend}",
        "tracking=none",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, run_dir


def _table(stdout: str) -> list[str]:
    """The slowest-ops table's lines after its header."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("slowest ops"))
    end = next(
        i for i in range(start + 1, len(lines)) if lines[i].startswith(("largest gaps", "report:"))
    )
    return lines[start + 1 : end]


def _op_p50s(run_dir: Path) -> Counter[float]:
    """How many op events of the timed blocks have each p50, read from events.csv."""
    with (run_dir / "events.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return Counter(
        float(r["p50"])
        for r in rows
        if r["event_name"] not in (METHOD_EVENT, DELEGATE_CALL_EVENT)
        and r["event_block_name"] != LOAD_BLOCK
        and (json.loads(r["debug_handles"]) or r["is_delegated_op"] == "True")
    )


def _rows(table: list[str]) -> list[re.Match[str]]:
    rows = [ROW.match(line) for line in table if not line.startswith(" ")]
    assert all(rows), table
    return [r for r in rows if r is not None]


def test_ops_sharing_a_p50_are_one_line_on_qnn_and_each_line_an_op_on_xnnpack(
    tmp_path: Path,
) -> None:
    stdout, run_dir = _run(tmp_path, "qnn")
    table = _table(stdout)
    rows = _rows(table)
    counts = _op_p50s(run_dir)
    slowest = sorted(counts, reverse=True)[:TOP_K]
    # One line per distinct p50, the ten slowest, each shown differently from the others.
    assert len(rows) == TOP_K and len({r["p50"] for r in rows}) == TOP_K
    for row, p50 in zip(rows, slowest, strict=True):
        assert float(row["p50"]) == pytest.approx(p50, rel=1e-3)
        label = row["label"]
        assert label.startswith(f"{counts[p50]} ops") if counts[p50] > 1 else "ops" not in label
    # The tiny ViT's two blocks: the cost model gives their equal kernels one time.
    assert any(r["label"] == "2 ops: linear_2+gelu, linear_6+gelu_1" for r in rows), table
    assert any(counts[p] > 1 for p in slowest)
    assert table[-1].startswith("   ops on one line tie: qnn's kernel times come from a cost model")
    # summary.json holds the groups (every op of a tie, not only the first ten events).
    groups = json.loads((run_dir / "summary.json").read_text())["slowest_op_groups"]
    assert [g["ops"] for g in groups] == [counts[p] for p in slowest]

    stdout, run_dir = _run(tmp_path, "xnnpack")
    rows = _rows(_table(stdout))
    counts = _op_p50s(run_dir)
    slowest = sorted(counts, reverse=True)[:TOP_K]
    assert len(rows) == TOP_K and len({r["p50"] for r in rows}) == TOP_K
    for row, p50 in zip(rows, slowest, strict=True):
        assert float(row["p50"]) == pytest.approx(p50, rel=1e-3)
        assert row["backend"] == "xnnpack"
        if counts[p50] == 1:  # a clock's p50s (ties are possible, not expected)
            assert "ops" not in row["label"] and not row["label"][0].isdigit()
    assert "cost model" not in stdout
