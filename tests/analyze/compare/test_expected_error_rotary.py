"""int8 Hugging Face Llama on ExecuTorch's XNNPACK with taps (issue 44): PT2E rounds the rotary
angle to int8 before cos/sin, and the expected error now models it (the converted program's own
quantize parameters on the fp32 ops they were made from), so a clean run PASSes while a fault in
the rotary block still FAILs; the rotary group, whose row compares no sample, is not counted as
covered but listed as not evaluated with the reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from tests.helpers.executorch_runs import run_on_executorch

LLAMA_INT8_TAPPED = (
    "model=custom",
    "model._target_=stages.export.zoo.hf.make",
    "+model.kwargs.arch=llama",
    "model.inputs=[{shape:[1,8],dtype:int64,high:128}]",
    "backend.precision=int8",
    "runtime.observe=tap",
)


@pytest.mark.executorch
@pytest.mark.timeout(900)  # two int8 lowerings (shipped + tapped) per run on 2 shared cores
@pytest.mark.parametrize("fault", [(), ("backend.fault.node=sin", "backend.fault.value=1.5")])
def test_int8_llama_rotary_angle_is_in_the_expected_error(
    make_cfg: Callable[..., DictConfig], tmp_path: Path, fault: tuple[str, ...]
) -> None:
    pytest.importorskip("transformers", reason="needs Hugging Face transformers: the hf extra")
    pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    summary, rows, _ = run_on_executorch(
        make_cfg, tmp_path / "run", tmp_path / "cache", *LLAMA_INT8_TAPPED, *fault
    )
    if fault:
        assert summary["verdict"] == "fail"
        return
    assert summary["verdict"] == "pass", summary["verdict_reason"]
    sin_rows = [r for r in rows if r["op_names"] == '["unsqueeze_15"]']  # sin, unsqueezed
    assert sin_rows and float(sin_rows[0]["expected_snr_db"]) < 40  # the angle's rounding
    instrumentation = summary["instrumentation"]
    empty = [r for r in rows if r["samples"] == "0" and '"sin"' in r["op_names"]]
    assert empty  # the rotary group: its last op (a metadata check) holds no tensor
    assert {"sin", "cos"} <= set(instrumentation["not_evaluated"])
    assert "compared 0 samples" in instrumentation["not_evaluated"]["sin"]
    assert {"sin", "cos"} <= set(instrumentation["ops_without_rows"])  # not counted as covered
