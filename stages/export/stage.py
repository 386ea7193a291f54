"""The export stage: model + inputs config → exported.pt2, inputs, reference outputs.

The ETRecord is the lower stage's output: it embeds these files, so export does not write one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.export import ExportedProgram
from torch.nn import Module

from stages.export.config import ExportConfig, InputsConfig, ModelConfig
from stages.export.exporter import export_model
from stages.export.generation import export_for_generation
from stages.export.inputs.selection import SelectedInputs, select_inputs
from stages.export.inputs.written_files import write_inputs_files
from stages.export.model_factory import build_model
from stages.export.reference_capture import program_outputs
from stages.formats.artifacts import ArtifactName
from stages.formats.exported_program import save_exported_program
from stages.formats.generation_signature import GenerationSignature, save_signature
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
    generation: Path | None = None  # generation.json, for runtime.generate.*
    calibration_inputs: Path | None = None  # when int8 calibrates on other samples
    labels: Path | None = None  # when the evaluation samples carry labels
    inputs_record: Path | None = None  # inputs.json: which samples did what


def _export(
    module: Module,
    model: ModelConfig,
    inputs: InputsConfig,
    export: ExportConfig,
    run_dir: Path,
    generate: int | None,
    max_len: int | None = None,
) -> tuple[ExportedProgram, SelectedInputs, GenerationSignature | None]:
    """The program and its samples (evaluation, calibration, labels); for a generation (prompt
    tokens, decode steps), the step program with its KV cache, the prefill's inputs and the
    signature."""
    error_log = run_dir / "export_error.log"
    if generate is not None:
        program, sample, signature = export_for_generation(
            module,
            model,
            inputs,
            generate,
            strict=export.strict,
            error_log=error_log,
            max_len=max_len,
        )
        return program, _prompt_inputs(sample, inputs.seed), signature
    selected = select_inputs(model.inputs, inputs, Path.cwd())
    program = export_model(
        module,
        selected.evaluation[0],
        strict=export.strict,
        decompose=export.decompose,
        model_name=model.name,
        error_log=error_log,
    )
    return program, selected, None


def _prompt_inputs(sample: tuple[torch.Tensor, ...], seed: int) -> SelectedInputs:
    """A generation's one seeded prompt, judged and (at int8) calibrated on."""
    part = {"count": 1, "indices": [0, 1], "first": f"seeded prompt (seed {seed})"}
    record = {
        "source": "random",
        "from": f"seed {seed}",
        "evaluation": part,
        "calibration": part,
        "calibrated_on_evaluation": True,
        "overlap": True,
        "notes": [],
        "labels": False,
    }
    return SelectedInputs([sample], [], None, record)


def run_export(
    model: ModelConfig,
    inputs: InputsConfig,
    export: ExportConfig,
    run_dir: Path,
    generate: int | None = None,
    max_len: int | None = None,
) -> ExportArtifacts:
    """Build, export with debug handles, record the reference outputs (`generate`: the prompt's
    length in tokens of a generation, see stages.export.generation)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    module = build_model(model)
    started = time.perf_counter()
    program, selected, signature = _export(
        module, model, inputs, export, run_dir, generate, max_len
    )
    samples = selected.evaluation
    export_seconds = time.perf_counter() - started
    references = [program_outputs(program, sample) for sample in samples]

    paths = {name: run_dir / name for name in ArtifactName}
    digest, _ = save_exported_program(program, paths[ArtifactName.EXPORTED_PROGRAM])
    remember_exported_program(program, digest)  # lower and analyze need not load it again
    save_samples(samples, paths[ArtifactName.INPUTS])
    save_samples(references, paths[ArtifactName.REFERENCE_OUTPUTS])
    calibration, labels, record = write_inputs_files(selected, run_dir)
    generation = None
    if signature is not None:
        generation = paths[ArtifactName.GENERATION]
        save_signature(signature, generation)
    nodes = list(iter_operator_nodes(program.graph_module))
    metrics = {
        "torch_export_s": export_seconds,  # the torch.export call alone
        "operator_nodes": float(len(nodes)),
        "debug_handles": float(len({n.meta["debug_handle"] for n in nodes})),
        "parameters": float(sum(p.numel() for p in module.parameters())),
        "samples": float(len(samples)),
        "calibration_samples": float(len(selected.calibration or samples)),
    }
    return ExportArtifacts(
        exported_program=paths[ArtifactName.EXPORTED_PROGRAM],
        inputs=paths[ArtifactName.INPUTS],
        reference_outputs=paths[ArtifactName.REFERENCE_OUTPUTS],
        metrics=metrics,
        generation=generation,
        calibration_inputs=calibration,
        labels=labels,
        inputs_record=record,
    )
