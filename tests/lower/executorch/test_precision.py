"""ExecuTorch's XNNPACK at int8 (PT2E) and fp16, against the exported fp32 program, and faults on
its real kernels: named by the first divergence, with no alarm on the clean runs."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from stages.formats.artifacts import ArtifactName
from tests.helpers.executorch_runs import run_tiny_mlp

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(600)]  # lowering on 2 shared cores
SKIP_REASON = "needs the executorch extra: pip install -e '.[executorch]'"


@pytest.fixture(autouse=True)
def _needs_executorch() -> None:
    pytest.importorskip("executorch.exir", reason=SKIP_REASON)


def test_int8_is_compared_with_the_fp32_program(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    summary, gaps, run_dir = run_tiny_mlp(tiny_cfg, tmp_path, "backend.precision=int8")
    assert summary["precision"] == "int8" and summary["verdict"] == "pass"  # no false alarm
    assert summary["reference_program"] == "exported fp32 program exported.pt2"
    assert summary["qdq_handles_attributed"] >= 1  # the weights' dequantize ops, the input's q
    assert gaps, "the XNNPACK partition's output is compared"
    ops = {op for g in gaps for op in json.loads(g["op_names"])}
    types = {t for g in gaps for t in json.loads(g["op_types"])}
    assert {"linear", "linear_1", "linear_2"} <= ops
    assert not any("quantize" in t for t in types)  # q/dq ops are no rows or ops of their own
    for g in gaps:
        # Against the fp32 program an int8 kernel shows its quantization error (the quantized
        # ATen program would match it to a few ULP), inside the error int8 itself is expected
        # to cost there.
        assert 15 < float(g["snr"]) < 80
        assert float(g["expected_snr_db"]) < 80 and float(g["excess_db"]) < float(g["margin_db"])
    lowering = json.loads((run_dir / ArtifactName.LOWERING_REPORT).read_text())
    assert lowering["precision"] == "int8" and lowering["fault_injected"] is None


def test_int8_on_the_portable_kernels_gives_a_row_per_op_and_none_per_qdq(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    summary, gaps, _ = run_tiny_mlp(
        tiny_cfg, tmp_path, "backend.precision=int8", backend="executorch_portable"
    )
    assert summary["precision"] == "int8" and summary["verdict"] == "pass"
    # every op is its own instruction here; the quantize/dequantize instructions between them
    # carry their ops' handles, and are no rows of their own
    assert [json.loads(g["op_names"]) for g in gaps] == [
        ["linear"],
        ["relu"],
        ["linear_1"],
        ["relu_1"],
        ["add"],
        ["linear_2"],
    ]
    assert all(g["runtime_dtype"] == "float32" and 15 < float(g["snr"]) < 80 for g in gaps)


def test_fp16_runs_half_kernels_and_says_what_it_cannot_capture(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    summary, gaps, _ = run_tiny_mlp(tiny_cfg, tmp_path, "backend.precision=fp16")
    assert summary["precision"] == "fp16"
    assert summary["partitions"] >= 1 and summary["latency_p50_ms"] > 0  # real half kernels ran
    assert "cannot log half tensors" in caplog.text
    assert summary["verdict"] == "not_evaluated" and not gaps
    assert any("intermediate outputs" in n["why"] for n in summary["not_evaluated"])
    # The program outputs are still logged (in blocks of their own): accuracy is judged on them.
    accuracy = summary["accuracy"]
    assert accuracy["met"] is not None, accuracy["reason"]
    assert all(30 < o["snr_db"] < 140 for o in accuracy["outputs"])  # half's error, not float's


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_fault_on_real_kernels_is_the_first_divergence(
    precision: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    summary, gaps, run_dir = run_tiny_mlp(
        tiny_cfg, tmp_path, f"backend.precision={precision}", "backend.fault.node=linear_1"
    )
    lowering = json.loads((run_dir / ArtifactName.LOWERING_REPORT).read_text())
    assert lowering["fault_injected"]["node"] == "linear_1"
    assert summary["verdict"] == "fail"
    first = summary["first_divergence"]
    assert "linear_1" in first["fault_nodes"]  # the op, inside the partition that holds it
    assert first["excess_db"] > first["margin_db"]
    # The fault op is no op of the reference: no row names it, its handle is the target's.
    assert not any("injected_fault" in op for g in gaps for op in json.loads(g["op_names"]))
    assert not math.isnan(float(gaps[0]["snr"]))
