"""The export stage: model + inputs config → exported.pt2, inputs, reference outputs.

The ETRecord is the lower stage's output: it embeds these files, so export does not write one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from stages.export.config import ExportConfig, InputsConfig, ModelConfig
from stages.export.exporter import export_model
from stages.export.model_factory import build_model
from stages.export.reference_capture import program_outputs
from stages.export.representative_inputs import representative_inputs
from stages.formats.artifacts import ArtifactName
from stages.formats.exported_program import save_exported_program
from stages.handles.graph_handles import iter_operator_nodes
from stages.handover.exported_program import remember_exported_program
from stages.handover.samples import save_samples


@dataclass(frozen=True)
class ExportArtifacts:
    """Files the export stage wrote, plus its metrics."""

    exported_program: Path
    inputs: Path
    reference_outputs: Path
    metrics: dict[str, float] = field(default_factory=dict)


def run_export(
    model: ModelConfig, inputs: InputsConfig, export: ExportConfig, run_dir: Path
) -> ExportArtifacts:
    """Build, export with debug handles, record the reference outputs."""
    run_dir.mkdir(parents=True, exist_ok=True)
    module = build_model(model)
    samples = representative_inputs(model.inputs, inputs)
    started = time.perf_counter()
    program = export_model(
        module,
        samples[0],
        strict=export.strict,
        decompose=export.decompose,
        model_name=model.name,
        error_log=run_dir / "export_error.log",
    )
    export_seconds = time.perf_counter() - started
    references = [program_outputs(program, sample) for sample in samples]

    paths = {name: run_dir / name for name in ArtifactName}
    digest, _ = save_exported_program(program, paths[ArtifactName.EXPORTED_PROGRAM])
    remember_exported_program(program, digest)  # lower and analyze need not load it again
    save_samples(samples, paths[ArtifactName.INPUTS])
    save_samples(references, paths[ArtifactName.REFERENCE_OUTPUTS])
    nodes = list(iter_operator_nodes(program.graph_module))
    metrics = {
        "torch_export_s": export_seconds,  # the torch.export call alone
        "operator_nodes": float(len(nodes)),
        "debug_handles": float(len({n.meta["debug_handle"] for n in nodes})),
        "parameters": float(sum(p.numel() for p in module.parameters())),
        "samples": float(len(samples)),
    }
    return ExportArtifacts(
        exported_program=paths[ArtifactName.EXPORTED_PROGRAM],
        inputs=paths[ArtifactName.INPUTS],
        reference_outputs=paths[ArtifactName.REFERENCE_OUTPUTS],
        metrics=metrics,
    )
