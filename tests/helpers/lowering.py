"""Export + lower a tiny zoo model in-process (shared by the lower and run tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from stages.export.stage import ExportArtifacts, run_export
from stages.formats.program import CondInstruction, OperatorInstruction, SubProgram
from stages.lower.stage import LowerArtifacts, run_lower


def export(cfg: DictConfig, run_dir: Path) -> ExportArtifacts:
    """The export stage of `cfg` into run_dir."""
    return run_export(
        OmegaConf.to_object(cfg.model),
        OmegaConf.to_object(cfg.inputs),
        OmegaConf.to_object(cfg.export),
        run_dir,
    )


def lower(cfg: DictConfig, exported: ExportArtifacts, run_dir: Path) -> LowerArtifacts:
    """The lower stage of `cfg` on what `export` wrote."""
    return run_lower(
        OmegaConf.to_object(cfg.backend),
        exported.exported_program,
        exported.inputs,
        exported.reference_outputs,
        run_dir,
        model_name=str(cfg.model.name),
    )


def export_and_lower(cfg: DictConfig, run_dir: Path) -> tuple[ExportArtifacts, LowerArtifacts]:
    exported = export(cfg, run_dir)
    return exported, lower(cfg, exported, run_dir)


def operator_handles(sub: SubProgram) -> set[int]:
    """Debug handles of operator calls, cond branches included."""
    found: set[int] = set()
    for instr in sub.instructions:
        if isinstance(instr, OperatorInstruction):
            found.add(instr.debug_handle)
        elif isinstance(instr, CondInstruction):
            found.add(instr.debug_handle)
            found |= operator_handles(instr.true_branch) | operator_handles(instr.false_branch)
    return found


def relative_error(outputs: list[Any], references: tuple[torch.Tensor, ...]) -> float:
    worst = 0.0
    for out, ref in zip(outputs, references, strict=True):
        if not ref.is_floating_point():
            assert torch.equal(out, ref)
            continue
        if not torch.isfinite(out).all() and torch.isfinite(ref).all():
            return float("inf")
        scale = float(ref.abs().max()) or 1.0
        worst = max(worst, float((out.float() - ref.float()).abs().max()) / scale)
    return worst


def snr_db(outputs: list[Any], references: tuple[torch.Tensor, ...]) -> float:
    out = torch.cat(
        [
            o.float().flatten()
            for o, r in zip(outputs, references, strict=True)
            if r.is_floating_point()
        ]
    )
    ref = torch.cat([r.float().flatten() for r in references if r.is_floating_point()])
    noise = float(((out - ref) ** 2).mean())
    return 10 * torch.log10(torch.tensor(float((ref**2).mean()) / max(noise, 1e-30))).item()
