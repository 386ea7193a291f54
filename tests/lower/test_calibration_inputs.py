"""int8 calibrates on calibration_inputs.pt when the export wrote one (the emulated backends and
ExecuTorch's PT2E), not on the evaluation samples of inputs.pt."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from stages.formats.samples import read_samples, write_samples
from stages.lower.stage import run_lower
from tests.helpers.configs import compose_config
from tests.helpers.lowering import export
from tests.helpers.optional import require_executorch


def _lowered_bytes(backend: str, tmp_path: Path, scale: float | None) -> bytes:
    """The lowered program of mlp at int8, calibrated on the evaluation samples (scale None) or
    on calibration_inputs.pt holding them scaled by `scale` (written where the export writes it,
    after an export that calibrates on other samples)."""
    calibrate = [] if scale is None else ["inputs.calibration=2"]
    overrides = ["model=mlp", f"backend={backend}", "backend.precision=int8", *calibrate]
    cfg = compose_config(tmp_path, overrides)
    run = tmp_path / f"{backend}-{scale}"
    exported = export(cfg, run)
    if scale is not None:
        assert exported.calibration_inputs is not None
        scaled = [(x * scale,) for (x,) in read_samples(exported.inputs)]
        write_samples(scaled, exported.calibration_inputs)
    lowered = run_lower(
        OmegaConf.to_object(cfg.backend),  # type: ignore[arg-type]
        exported.exported_program,
        exported.inputs,
        exported.reference_outputs,
        run,
        model_name="mlp",
    )
    return lowered.program.read_bytes()


def test_emulated_int8_calibrates_on_the_calibration_file(tmp_path: Path) -> None:
    own = _lowered_bytes("xnnpack", tmp_path, None)
    assert _lowered_bytes("xnnpack", tmp_path, 1.0) == own  # the same samples: the same scales
    assert _lowered_bytes("xnnpack", tmp_path, 100.0) != own


@pytest.mark.executorch
def test_executorch_pt2e_calibrates_on_the_calibration_file(tmp_path: Path) -> None:
    require_executorch()
    own = _lowered_bytes("executorch_xnnpack", tmp_path, None)
    assert _lowered_bytes("executorch_xnnpack", tmp_path, 100.0) != own
