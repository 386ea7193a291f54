"""What an author meets, shown through the example backend (docs/examples/npu_backend.py, outside
the package, importing only `stages.backends.api`) with one `backend.compile_specs.bug` switch
each: map errors gate the verdict, a wrong clock and off-by-one logging are findings, and a
partition blamed as a whole points at its first op."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import open_dict

from pipeline.runner import run_pipeline
from stages.analyze.report.terminal_report import format_terminal_report
from tests.helpers.cli_runner import REPO, console_script, run_console
from tests.helpers.configs import compose_config

EXAMPLE = REPO / "docs" / "examples" / "npu_backend.py"
TARGET = f"backend._target_={EXAMPLE}:NpuBackend"
FAST = ("model=mlp", "runtime.iterations=2", "tracking=none")

Run = Callable[..., dict[str, Any]]


@pytest.fixture(scope="module")
def run_bug(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """run_bug(bug, *overrides) -> summary.json of a tiny run of the example with that bug."""
    root = tmp_path_factory.mktemp("author_bugs")

    def _run(bug: str, *overrides: str, target: str = TARGET) -> dict[str, Any]:
        label = "-".join([bug or "clean", *overrides, str(hash(target))])
        label = label.replace("=", "_").replace(".", "_").replace("/", "_")
        spec = [f"+backend.compile_specs.bug={bug}"] if bug else []
        cfg = compose_config(
            root / label, [*FAST, target, *spec, f"cache_dir={root / 'cache'}", *overrides]
        )
        with open_dict(cfg):
            cfg.run_dir = str(root / label / "run")
        run_pipeline(cfg, print_summary=False)
        summary: dict[str, Any] = json.loads((root / label / "run" / "summary.json").read_text())
        summary["_dir"] = str(root / label / "run")
        return summary

    return _run


def _kinds(summary: dict[str, Any]) -> list[str]:
    return [f["kind"] for f in summary["delegate_map_check"]]


def test_clean_example_has_no_finding_and_passes(run_bug: Run) -> None:
    summary = run_bug("")
    assert summary["delegate_map_check"] == [] and summary["verdict"] == "pass"
    assert "unverified_ops" not in summary


def test_fused_kernel_mapping_its_first_op_cannot_pass(run_bug: Run) -> None:
    summary = run_bug("map_first_op_only")
    assert "uncovered_handles" in _kinds(summary)
    assert summary["verdict"] == "map_errors" and summary["numeric_verdict"] == "pass"
    (item,) = summary["unverified_ops"]
    assert item["kind"] == "uncovered_handles"
    assert {"relu", "relu_1"} <= set(item["ops"])
    assert "relu, relu_1" in summary["verdict_reason"]
    terminal = format_terminal_report(Path(summary["_dir"]) / "summary.json")
    assert "verdict MAP_ERRORS" in terminal


def test_map_errors_warn_keeps_the_old_verdict(run_bug: Run) -> None:
    summary = run_bug("map_first_op_only", "analyze.map_errors=warn")
    assert summary["verdict"] == "pass" and "uncovered_handles" in _kinds(summary)
    assert summary["unverified_ops"][0]["kind"] == "uncovered_handles"  # still listed


def test_stamps_in_microseconds_read_as_nanoseconds_are_a_clock_mismatch(run_bug: Run) -> None:
    summary = run_bug("clock_us")
    (finding,) = [f for f in summary["delegate_map_check"] if f["kind"] == "clock_mismatch"]
    assert finding["severity"] == "error" and finding["partition_id"] == 0
    numbers = finding["numbers"]
    assert numbers["ratio"] <= 0.1 and numbers["ticks_per_ms"] == 1e6
    # A slower clock than the claimed ns (the exact one needs real kernel times: see the unit
    # tests in tests/analyze/link/test_clock_check.py).
    assert numbers["likely_ticks_per_ms"] < 1e6
    assert f"ticks_per_ms={numbers['likely_ticks_per_ms']:g}" in finding["message"]
    assert summary["verdict"] == "map_errors"
    assert summary["unverified_ops"][0]["what"] == "kernel timings"


def test_off_by_one_logging_is_named_not_blamed_on_the_inputs(run_bug: Run) -> None:
    summary = run_bug("log_shifted")
    shape = [f for f in summary["delegate_map_check"] if f["kind"] == "shape_mismatch"]
    assert shape, summary["delegate_map_check"]
    first = shape[0]
    assert "logged under the wrong identifier?" in first["message"]
    logged, neighbour = first["identifiers"]
    # mlp: k0, k1 linear+relu [*, 64], k2 add [*, 64], k3 linear [*, 10]; k2's output under k3
    assert logged == "npu/p0/k3:linear" and neighbour == "npu/p0/k2:add"
    assert first["not_comparable"] == [logged]
    assert first["numbers"]["logged_shape"] not in first["numbers"]["expected_shapes"]
    text = json.dumps(summary)
    assert "representative inputs" not in text  # the input hint stays silent
    assert summary["verdict"] in ("fail", "map_errors")


def test_first_divergence_of_a_whole_partition_names_its_ops_in_order(run_bug: Run) -> None:
    summary = run_bug("no_outputs", "+backend.fault.node=linear_1")
    first = summary["first_divergence"]
    assert first["narrowed"] is False and first["partition_id"] == 0
    ops = [o["op"] for o in first["ops_in_order"]]
    assert ops == first["op_names"] and ops[0] == "linear"
    # Never the partition's last op's line: the first op's (nothing narrower can be told).
    assert first["source_line"] == first["ops_in_order"][0]["source_line"]
    assert first["source_line"] != first["ops_in_order"][-1]["source_line"]


def test_map_errors_exit_4_from_the_console(tmp_path: Path) -> None:
    script = console_script(tmp_path / "bin")
    args = (*FAST, TARGET, "+backend.compile_specs.bug=map_first_op_only", "hydra.run.dir=run")
    result = run_console(script, *args, cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    assert "verdict: MAP_ERRORS" in result.stderr and "relu" in result.stderr
    warned = run_console(script, *args, "analyze.map_errors=warn", cwd=tmp_path)
    assert warned.returncode == 0, warned.stderr


def test_no_fault_hint_for_a_backend_that_refuses_faults(run_bug: Run, tmp_path: Path) -> None:
    """The same wrong logging through an author's copy that sets `applies_faults = False`: the
    first divergence names no `backend.fault.node` (such a backend refuses every fault)."""
    summary = run_bug("log_shifted")
    assert summary["first_divergence"]["fault_nodes"]  # the example takes faults
    text = format_terminal_report(Path(summary["_dir"]) / "summary.json")
    assert "(as backend.fault.node takes it)" in text

    source = EXAMPLE.read_text()
    assert "    applies_faults = True" in source
    copy = tmp_path / "npu_no_faults.py"
    copy.write_text(source.replace("    applies_faults = True", "    applies_faults = False"))
    refusing = run_bug("log_shifted", target=f"backend._target_={copy}:NpuBackend")
    assert refusing["verdict"] == "fail" and refusing["first_divergence"]["fault_nodes"] == []
    text = format_terminal_report(Path(refusing["_dir"]) / "summary.json")
    assert "backend.fault.node" not in text


def test_one_gap_figure_per_op_in_the_card_and_the_terminal(run_bug: Run) -> None:
    """Judged on observed vs expected SNR, the first divergence shows that figure alone (no
    comparator SNR of the same output beside it)."""
    summary = run_bug("log_shifted")
    first = summary["first_divergence"]
    assert first["excess_db"] is not None and first["local_gap"] is not None  # both computed
    terminal = format_terminal_report(Path(summary["_dir"]) / "summary.json")
    headline = next(line for line in terminal.splitlines() if line.startswith("first divergence"))
    assert "local snr" not in headline and "observed" in terminal
    card = (Path(summary["_dir"]) / "report.html").read_text()
    card = card[card.index("First divergence") :]
    assert "<th>observed_snr_db</th>" in card
    assert "<th>local_gap</th>" not in card and "<th>accumulated_gap</th>" not in card
