"""runtime.observe=tap on ExecuTorch's XNNPACK at int8: ExecuTorch's own default tap misfiles
values (issue 34) and the plausibility check refuses them; this tool's tap points come back as
the eager values, leave the shipped program's outputs unchanged, and give the ops of a real
partition their own rows, the faulted one named by the first divergence."""

from __future__ import annotations

import copy
import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import DictConfig

from stages.run.executorch.tap_checks import finite_range, refusal
from tests.helpers.executorch_runs import run_tiny_mlp

pytestmark = [pytest.mark.executorch, pytest.mark.timeout(600)]  # lowering on 2 shared cores
SKIP_REASON = "needs the executorch extra: pip install -e '.[executorch]'"


class ConvLinear(torch.nn.Module):
    """The issue's two-layer conv/linear model."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.relu(self.conv(x)).mean((2, 3)))


@pytest.fixture
def int8_program() -> tuple[Any, torch.Tensor]:
    """The model quantized with PT2E for XNNPACK (as backend.precision=int8 does)."""
    pytest.importorskip("executorch.exir", reason=SKIP_REASON)
    from stages.lower.executorch.precision import program_at_precision

    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    program = torch.export.export(ConvLinear().eval(), (x,))
    return program_at_precision(program, "int8", [(x,)]), x


def _run(buffer: bytes, x: torch.Tensor) -> list[torch.Tensor]:
    from stages.run.executorch.runtime import load_module

    return list(load_module(buffer, "test program").run_method("forward", (x,)))


def _lower(program: Any, **options: Any) -> Any:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    return to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()], **options)


def _as_tap(value: torch.Tensor, name: str) -> dict[str, Any]:
    """What this tool records of a tap: its eager value's shape, dtype and range."""
    shape, dtype = list(value.shape), str(value.dtype)
    return {"ops": [name], "shape": shape, "dtype": dtype, "eager_ranges": [finite_range(value)]}


def test_executorch_default_tap_misfiles_the_check_refuses_it_our_tap_points_do_not(
    int8_program: tuple[Any, torch.Tensor], tmp_path: Path
) -> None:
    from executorch.devtools.intermediate_output_tap import (
        FULL_TENSOR,
        select_all_call_function,
        strip_taps_,
        tap_intermediate_outputs_,
    )

    program, x = int8_program
    tapped, specs = tap_intermediate_outputs_(
        copy.deepcopy(program), rules=[(select_all_call_function(), FULL_TENSOR)]
    )
    eager = torch.utils._pytree.tree_flatten(tapped.module()(x))[0]
    edge = _lower(tapped)
    strip_taps_(edge)
    runtime = _run(edge.to_executorch().buffer, x)
    refused, misfiled = set(), set()
    for spec in specs:
        ours, theirs = eager[spec.output_index], runtime[spec.output_index]
        if refusal(theirs, _as_tap(ours, spec.node_name), 0) is not None:
            refused.add(spec.node_name)
        if not torch.allclose(ours.float(), theirs.float(), atol=0.05):
            misfiled.add(spec.node_name)
    # The issue's symptoms: the conv's tap holds another tensor (the weights' range), the input's
    # dequantize tap reads zeros. Both are refused; a value equal to its eager one never is.
    assert {"conv2d", "dequantize_per_tensor"} <= misfiled
    assert {"conv2d", "dequantize_per_tensor"} <= refused <= misfiled
    _tap_points_come_back_as_eager_values(program, x, tmp_path)


def _tap_points_come_back_as_eager_values(program: Any, x: torch.Tensor, tmp_path: Path) -> None:
    """The same model through this tool's tap points: every value is its op's, the program's
    own output is bit-equal, only copies of tapped values were added to XNNPACK's graph."""
    from executorch.exir import to_edge_transform_and_lower

    from stages.lower.executorch.instrumentation_check import COPY_KINDS
    from stages.lower.executorch.tap import lower_tapped
    from stages.run.executorch.tap_checks import dequantized

    plain = _lower(copy.deepcopy(program), generate_etrecord=True).to_executorch()
    path, manifest_path, _ = lower_tapped(
        program,
        plain.get_etrecord(),
        plain.buffer,
        [_xnnpack()],
        [(x,)],
        tmp_path,
        to_edge_transform_and_lower,
        "int8",
    )
    manifest = json.loads(manifest_path.read_text())
    runtime = _run(path.read_bytes(), x)
    shipped = _run(plain.buffer, x)
    assert torch.equal(runtime[0], shipped[0])  # the program's own output, bit for bit
    check = manifest["instrumentation"]
    assert check["partitions"]["shipped"] == check["partitions"]["instrumented"]
    assert check["fusion_changed_ops"] == [] and not check["changed_what_ran"]
    added = {kind for nodes in check["copies_added"].values() for kind in nodes}
    assert added <= COPY_KINDS  # e.g. the conv's NHWC value handed out as NCHW
    assert sorted(check["delegated_ops"]) == ["conv2d", "linear", "relu"]  # XNNPACK computes
    taps = manifest["taps"]
    # mean runs outside XNNPACK; the quantize of its output inside is tapped for it
    assert [t["ops"] for t in taps] == [["conv2d", "relu"], ["mean"], ["linear"]]
    for tap in taps:
        value = runtime[tap["output_index"]]
        assert refusal(value, tap, 0) is None
        low, high = tap["eager_ranges"][0]
        got = dequantized(value, tap)
        assert abs(float(got.min()) - low) < 1e-6 and abs(float(got.max()) - high) < 1e-6


def _xnnpack() -> Any:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return XnnpackPartitioner()


def test_tap_gives_each_op_of_an_int8_partition_a_row_and_names_the_faulted_one(
    tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    pytest.importorskip("executorch.exir", reason=SKIP_REASON)
    summary, gaps, _ = run_tiny_mlp(
        tiny_cfg,
        tmp_path,
        "backend.precision=int8",
        "backend.fault.node=linear_1",
        "runtime.observe=tap",
    )
    tapped = [g for g in gaps if "tap:" in g["delegate_debug_identifiers"]]
    assert len(tapped) >= 3  # one row per (fused) op instead of one per partition
    record = summary["instrumentation"]
    assert record["ops_with_rows"] / record["ops_delegated"] >= 0.9
    assert record["refused"] == [] and record["final_outputs"]["bit_equal"]
    assert summary["verdict"] == "fail"
    first = summary["first_divergence"]
    assert "linear_1" in first["op_names"] and "linear" not in first["op_names"]
    assert len(first["op_names"]) <= 2  # the fused kernel holding it, not the whole partition


def test_a_program_executorch_cannot_lower_once_tapped_names_what_to_use_instead() -> None:
    """XNNPACK refusing the instrumented program (as on Hugging Face BERT) is a clear error
    naming runtime.observe=bisect and off, not ExecuTorch's traceback."""
    pytest.importorskip("executorch.devtools.intermediate_output_tap", reason=SKIP_REASON)
    from stages.lower.executorch.tap import ExecuTorchTapError, _lowered_without_taps

    def refusing_lower(program: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Expected a tensor of kind placeholder")

    with pytest.raises(ExecuTorchTapError) as raised:
        _lowered_without_taps(object(), [], refusing_lower)
    message = str(raised.value)
    assert "could not lower the instrumented program" in message
    assert "placeholder" in message
    assert "runtime.observe=bisect" in message and "runtime.observe=off" in message


def _tapped_encoder_block(make_cfg: Callable[..., DictConfig], *overrides: str) -> Path:
    """The encoder block run on executorch_xnnpack with runtime.observe=tap; its run dir."""
    pytest.importorskip("executorch.exir", reason=SKIP_REASON)
    from pipeline.runner import run_pipeline
    from tests.helpers.encoder_block import INPUTS

    cfg = make_cfg(
        "model=custom",
        "model._target_=tests.helpers.encoder_block.make",
        f"model.inputs={INPUTS}",
        "backend=executorch_xnnpack",
        "runtime.observe=tap",
        *overrides,
        "runtime.iterations=2",
        "tracking=none",
        "analyze.fail_exit_code=false",
    )
    return Path(run_pipeline(cfg, print_summary=False).run_dir)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_an_encoder_block_is_tapped_elided_ops_left_out_decomposed_attention_filed_right(
    make_cfg: Callable[..., DictConfig], tmp_path: Path, precision: str
) -> None:
    """Hugging Face-style attention at fp32: the eval-mode dropout XNNPACK elides shares one tap
    with the projection before it (two taps of one value made XNNPACK refuse the program), and the
    attention, which runs partly outside XNNPACK, is compared on its tapped output, not on a
    kernel's intermediate logged under the same handle. A clean run passes."""
    from stages.formats.artifacts import ArtifactName

    run_dir = _tapped_encoder_block(make_cfg, f"backend.precision={precision}")
    summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
    record = summary["instrumentation"]
    taps = json.loads((run_dir / ArtifactName.TAP_MANIFEST).read_text())["taps"]
    # the projection's value leaves through the dropout XNNPACK elides: one tap, at the dropout
    (out,) = [t for t in taps if "dropout" in t["ops"]]
    assert out["source"] == "dropout" and out["ops"][0].startswith("linear")
    assert record["elided_ops"] == []
    assert any("scaled_dot_product_attention" in t["ops"] for t in taps)
    assert record["refused"] == [] and record["final_outputs"]["bit_equal"]
    gaps = list(csv.DictReader((run_dir / ArtifactName.NUMERIC_GAP_CSV).open()))
    attention = [g for g in gaps if "scaled_dot_product_attention" in g["op_names"]]
    assert attention and all(g["status"] == "ok" for g in attention)
    assert summary["verdict"] == "pass", summary.get("first_divergence")


def test_an_int8_fault_on_the_dropout_xnnpack_elides_is_named_there(
    make_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    """At int8 the fault op after an elided dropout is quantized with it: its tap is filed under
    the dropout (with the projection it shares a tap with), which the first divergence names."""
    from stages.formats.artifacts import ArtifactName

    run_dir = _tapped_encoder_block(
        make_cfg, "backend.precision=int8", "backend.fault.node=dropout"
    )
    summary = json.loads((run_dir / ArtifactName.SUMMARY_JSON).read_text())
    assert summary["verdict"] == "fail"
    first = summary["first_divergence"]
    assert "dropout" in first["op_names"] and first["excess_db"] > 20
    assert summary["instrumentation"]["refused"] == []
