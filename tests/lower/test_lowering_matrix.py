"""Every zoo model × {xnnpack, qnn, portable}: lowering, handle coverage, fusion, numerics."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from stages.handles.graph_handles import iter_operator_nodes
from stages.handover.etrecord import load_etrecord
from stages.handover.exported_program import load_exported_program
from stages.handover.lowered_program import load_program
from stages.handover.samples import load_samples
from stages.run.executor import Executor
from tests.helpers.configs import ZOO_MODELS
from tests.helpers.lowering import export_and_lower, operator_handles, relative_error, snr_db

# Relative max-abs error per precision; int8 is judged by SNR (documented in README).
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-2}
INT8_MIN_SNR_DB = 20.0
BACKENDS = {"xnnpack": "fp32", "qnn": "fp16", "portable": "fp32"}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("model", ZOO_MODELS)
def test_lowering_covers_every_handle_and_matches_the_export(
    model: str, backend: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    precision = BACKENDS[backend]
    exported, lowered = export_and_lower(
        tiny_cfg(model, f"backend={backend}", f"backend.precision={precision}"), tmp_path
    )
    program = load_program(lowered.program)
    record = load_etrecord(lowered.etrecord)
    reference = load_exported_program(exported.exported_program)
    all_handles = {n.meta["debug_handle"] for n in iter_operator_nodes(reference.graph_module)}

    delegated = {
        h for m in record.delegate_maps for handles in m.debug_handle_map.values() for h in handles
    }
    covered = delegated | operator_handles(program.main)
    assert covered == all_handles, f"uncovered handles: {sorted(all_handles - covered)}"
    if backend == "portable":
        assert not record.delegate_maps and lowered.metrics["partitions"] == 0
    else:
        assert lowered.metrics["partitions"] >= 1 and delegated

    executor = Executor(program)
    for sample, ref in zip(
        load_samples(exported.inputs), load_samples(exported.reference_outputs), strict=True
    ):
        assert relative_error(executor.execute(sample), ref) <= TOLERANCE[precision]


@pytest.mark.parametrize("backend", ["xnnpack", "qnn"])
@pytest.mark.parametrize("model", ["vit", "mlp", "mobilenet_v2"])
def test_fused_kernels_map_to_every_handle_they_cover(
    model: str, backend: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    _, lowered = export_and_lower(tiny_cfg(model, f"backend={backend}"), tmp_path)
    record = load_etrecord(lowered.etrecord)
    fused = [h for m in record.delegate_maps for h in m.debug_handle_map.values() if len(h) > 1]
    assert fused and lowered.metrics["fused_kernels"] == len(fused)
    identifiers = [i for m in record.delegate_maps for i in m.debug_handle_map]
    expected_type = int if backend == "xnnpack" else str
    assert all(isinstance(i, expected_type) for i in identifiers)
    if backend == "qnn":
        assert any(str(i).startswith("fused_op_") for i in identifiers)


@pytest.mark.parametrize(
    ("backend", "precision"),
    [("xnnpack", "fp16"), ("xnnpack", "int8"), ("qnn", "int8"), ("qnn", "fp32")],
)
@pytest.mark.parametrize("model", ["vit", "mobilenet_v2", "llm"])
def test_other_precisions_stay_within_their_tolerance(
    model: str, backend: str, precision: str, tiny_cfg: Callable[..., DictConfig], tmp_path: Path
) -> None:
    exported, lowered = export_and_lower(
        tiny_cfg(model, f"backend={backend}", f"backend.precision={precision}", "inputs.count=2"),
        tmp_path,
    )
    executor = Executor(load_program(lowered.program))
    for sample, ref in zip(
        load_samples(exported.inputs), load_samples(exported.reference_outputs), strict=True
    ):
        outputs = executor.execute(sample)
        if precision == "int8":
            assert snr_db(outputs, ref) >= INT8_MIN_SNR_DB
            assert relative_error(outputs, ref) > 1e-6  # it really quantized
        else:
            assert relative_error(outputs, ref) <= TOLERANCE[precision]
