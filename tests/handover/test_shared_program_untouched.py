"""The stages of one invocation share one copy of the exported program's weights (the export
stage's, kept by `stages.formats.exported_program`): lowering, running and analysing with every
built-in backend, precision and fault kind must never write into them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from stages.analyze.stage import run_analyze
from stages.export.stage import run_export
from stages.handover import exported_program as ep_handover
from stages.lower.stage import run_lower
from stages.run.stage import run_run

CASES = [
    ("xnnpack", "fp32", []),
    ("xnnpack", "int8", []),
    ("xnnpack", "fp16", ["backend.fault.node=linear_1", "backend.fault.kind=transpose"]),
    ("qnn", "fp16", ["backend.fault.node=layer_norm_1", "backend.fault.kind=epsilon"]),
    ("qnn", "int8", ["backend.fault.node=matmul_1", "backend.fault.kind=nan"]),
    ("portable", "fp32", ["backend.fault.node=gelu", "backend.fault.kind=scale"]),
]


@pytest.mark.parametrize(("backend", "precision", "fault"), CASES)
def test_no_stage_writes_into_the_weights_it_shares(
    tiny_cfg: Callable[..., DictConfig],
    tmp_path: Path,
    backend: str,
    precision: str,
    fault: list[str],
) -> None:
    cfg = tiny_cfg("vit", f"backend={backend}", f"backend.precision={precision}", *fault)
    ep_handover._LOADED.clear()
    run_dir = tmp_path / "run"
    exported = run_export(
        OmegaConf.to_object(cfg.model),
        OmegaConf.to_object(cfg.inputs),
        OmegaConf.to_object(cfg.export),
        run_dir,
    )
    (kept,) = ep_handover._LOADED.values()
    shared = ep_handover._shared_tensors(kept.program)
    assert shared, "the export stage keeps the program it saved"
    before = [(t._version, t.detach().clone()) for t in shared]

    lowered = run_lower(
        OmegaConf.to_object(cfg.backend),
        exported.exported_program,
        exported.inputs,
        exported.reference_outputs,
        run_dir,
        model_name="vit",
    )
    ran = run_run(OmegaConf.to_object(cfg.runtime), lowered.program, exported.inputs, run_dir)
    run_analyze(
        OmegaConf.to_object(cfg.analyze), ran.etdump, ran.debug_buffer, lowered.etrecord, run_dir
    )

    assert [kept] == list(ep_handover._LOADED.values()), "the kept program was never dropped"
    for tensor, (version, values) in zip(shared, before, strict=True):
        assert tensor._version == version
        assert torch.equal(tensor.detach(), values)  # also writes that bypass the version counter
