"""A `nan` fault is a finding, never a crash: the run is analysed to the end, the op is named,
and every file it writes is strict JSON (issue 44: summary.json died on the instrumentation's
NaN `min_snr_db`, the SNR of two NaN outputs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from tests.helpers.executorch_runs import run_tiny_mlp
from tests.helpers.strict_json import strict_json_files

NAN_FAULT = ("backend.fault.node=linear_1", "backend.fault.kind=nan")


@pytest.mark.executorch
@pytest.mark.timeout(600)  # lowering twice (shipped + instrumented) on 2 shared cores
def test_a_nan_fault_on_executorch_xnnpack_with_taps_is_analysed_and_written_as_json(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    _, _, run_dir = run_tiny_mlp(tiny_cfg, tmp_path, *NAN_FAULT, "runtime.observe=tap")
    files = strict_json_files(run_dir)
    summary = files["summary.json"]
    assert {"lowering.json", "taps.json", "instrumentation.json"} <= set(files)
    assert summary["verdict"] == "fail"
    assert summary["first_divergence"]["fault_nodes"][0] == "linear_1"
    # Both programs compute the NaN in the same places: instrumentation changed nothing, and the
    # NaN is named where it is, not averaged into an SNR.
    finals = summary["instrumentation"]["final_outputs"]
    assert finals["bit_equal"] and finals["within_expected_error"]
    assert finals["min_snr_db"] is None
    assert finals["non_finite"]["same_places"] and finals["non_finite"]["shipped"] > 0
    assert summary["instrumentation"]["changed_what_ran"] is False


def test_a_nan_fault_on_the_emulated_xnnpack_is_analysed_and_written_as_json(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    _, _, run_dir = run_tiny_mlp(tiny_cfg, tmp_path, *NAN_FAULT, backend="xnnpack")
    summary = strict_json_files(run_dir)["summary.json"]
    assert summary["verdict"] == "fail"
    assert summary["first_divergence"]["fault_nodes"][0] == "linear_1"
    assert summary["first_divergence"]["observed_snr_db"] == "-inf"
