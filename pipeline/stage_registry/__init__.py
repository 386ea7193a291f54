"""The four stages as the runner sees them: config slice, input files, code, and how to call.

Stage modules are imported lazily so `--help` and `--cfg job` stay fast.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from stages.closed_sets import ObserveMode
from stages.formats.artifacts import ArtifactName
from stages.formats.executorch.program import is_executorch_backend


def _to_object(node: Any) -> Any:
    return OmegaConf.to_object(node)


def _path_or(run_dir: Path, override: str | None, default: ArtifactName) -> Path:
    return Path(override).expanduser().resolve() if override else run_dir / default


@dataclass(frozen=True)
class StageSpec:
    """How the runner fingerprints and calls one stage."""

    name: str
    # Top-level config groups or dotted keys ("model.name") the stage's result depends on.
    config_keys: tuple[str, ...]
    # The module holding the stage function: its code version is what this module imports.
    entry_module: str
    inputs: Callable[[DictConfig, Path], list[Path]]
    optional_inputs: Callable[[DictConfig, Path], list[Path]]
    call: Callable[[DictConfig, Path], Any]
    produced_by: str
    # Its results are timings: the torch thread count is part of its fingerprint, so a run
    # measured under another thread count is never reused (a sweep's jobs split the cores).
    timed: bool = False
    # Inputs that are not files, by name, with their sha256 (a loader's samples).
    digests: Callable[[DictConfig], dict[str, str]] = lambda cfg: {}


def _export_inputs(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """The data files `inputs.path` matches (inputs=files): editing one invalidates the export."""
    from stages.export.inputs.cache_inputs import data_files

    return data_files(_to_object(cfg.inputs))


def _export_optional(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """The model's and a loader's source files: editing either invalidates a cached export."""
    from stages.export.inputs.cache_inputs import loader_source
    from stages.export.model_target import target_source_file

    source = target_source_file(str(cfg.model._target_), Path.cwd())
    return ([source] if source is not None else []) + loader_source(_to_object(cfg.inputs))


def _export_digests(cfg: DictConfig) -> dict[str, str]:
    """A loader's samples: data it reads from elsewhere invalidates the export when it changes."""
    from stages.export.inputs.cache_inputs import loader_samples_sha256

    model = _to_object(cfg.model)
    found = loader_samples_sha256(model.inputs, _to_object(cfg.inputs), Path.cwd())
    return {} if found is None else {"samples of inputs._target_": found}


def _backend_source(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """A user's backend source file: editing it invalidates a cached lower and run (a built-in's
    code is in the stage's code version already)."""
    from stages.backends.backend_registry import BUILTIN_BACKEND_NAMES
    from stages.python_target import target_source_file

    target = str(cfg.backend.get("_target_") or "")
    if not target or target in BUILTIN_BACKEND_NAMES:
        return []
    source = target_source_file(target, Path.cwd())
    return [source] if source is not None else []


def generation_lengths(cfg: DictConfig) -> tuple[int, int] | None:
    """(prompt tokens, decode steps) of `runtime.generate`, or None when it is off."""
    generate = cfg.runtime.get("generate")
    if generate is None or generate.get("prompt_tokens") is None:
        return None
    return int(generate.prompt_tokens), int(generate.new_tokens)


def _generation_file(cfg: DictConfig, run_dir: Path) -> list[Path]:
    return [run_dir / ArtifactName.GENERATION] if generation_lengths(cfg) is not None else []


def _call_export(cfg: DictConfig, run_dir: Path) -> Any:
    from stages.export.stage import run_export

    return run_export(
        _to_object(cfg.model),
        _to_object(cfg.inputs),
        _to_object(cfg.export),
        run_dir,
        (generation_lengths(cfg) or (None, 0))[0],
        cfg.runtime.generate.get("max_len"),
    )


def _lower_inputs(cfg: DictConfig, run_dir: Path) -> list[Path]:
    return [
        run_dir / ArtifactName.EXPORTED_PROGRAM,
        run_dir / ArtifactName.INPUTS,
        run_dir / ArtifactName.REFERENCE_OUTPUTS,
        *_generation_file(cfg, run_dir),
    ]


def _lower_optional(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """The calibration samples, when not inputs.pt (changing them invalidates a cached lower),
    and a user's backend source."""
    from stages.formats.inputs_record import calibration_file

    inputs = run_dir / ArtifactName.INPUTS
    calibration = calibration_file(inputs)
    return ([calibration] if calibration != inputs else []) + _backend_source(cfg, run_dir)


def _call_lower(cfg: DictConfig, run_dir: Path) -> Any:
    from stages.lower.stage import run_lower

    return run_lower(
        _to_object(cfg.backend),
        run_dir / ArtifactName.EXPORTED_PROGRAM,
        run_dir / ArtifactName.INPUTS,
        run_dir / ArtifactName.REFERENCE_OUTPUTS,
        run_dir,
        model_name=str(cfg.model.name),
        generation=next(iter(_generation_file(cfg, run_dir)), None),
        observe=str(cfg.runtime.get("observe", ObserveMode.off)),
    )


def _program(cfg: DictConfig, run_dir: Path) -> Path:
    """The lower stage's program: ExecuTorch's .pte for executorch_* backends, else ours."""
    executorch = is_executorch_backend(str(cfg.backend.name))
    return run_dir / (ArtifactName.EXECUTORCH_PROGRAM if executorch else ArtifactName.PROGRAM)


def _tap_files(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """The instrumented program and its tap points (runtime.observe=tap on executorch_*)."""
    tapped = str(cfg.runtime.get("observe", ObserveMode.off)) == ObserveMode.tap
    if not tapped or not is_executorch_backend(str(cfg.backend.name)):
        return []
    return [run_dir / ArtifactName.TAP_PROGRAM, run_dir / ArtifactName.TAP_MANIFEST]


def _run_inputs(cfg: DictConfig, run_dir: Path) -> list[Path]:
    return [
        _program(cfg, run_dir),
        run_dir / ArtifactName.INPUTS,
        *_generation_file(cfg, run_dir),
        *_tap_files(cfg, run_dir),
    ]


def _call_run(cfg: DictConfig, run_dir: Path) -> Any:
    from stages.run.stage import run_run

    generation = _generation_file(cfg, run_dir)
    return run_run(
        _to_object(cfg.runtime),
        _program(cfg, run_dir),
        run_dir / ArtifactName.INPUTS,
        run_dir,
        generation=generation[0] if generation else None,
        taps=tuple(_tap_files(cfg, run_dir)),
    )


def _analyze_inputs(cfg: DictConfig, run_dir: Path) -> list[Path]:
    return [_path_or(run_dir, cfg.analyze.etdump, ArtifactName.ETDUMP)]


def _analyze_optional(cfg: DictConfig, run_dir: Path) -> list[Path]:
    etrecord = _path_or(run_dir, cfg.analyze.etrecord, ArtifactName.ETRECORD)
    # The program an ETRecord refers to by hash: by default the one beside the ETRecord.
    program = _path_or(etrecord.parent, cfg.analyze.exported_program, ArtifactName.EXPORTED_PROGRAM)
    return [
        etrecord,
        _path_or(run_dir, cfg.analyze.debug_buffer, ArtifactName.DEBUG_BUFFER),
        _path_or(run_dir, cfg.analyze.pte, ArtifactName.EXECUTORCH_PROGRAM),
        program,
        run_dir / ArtifactName.STEP_INPUTS,  # a generation's captured steps' inputs
        run_dir / ArtifactName.GENERATION,  # its signature (ExecuTorch's ETRecord has no room)
        run_dir / ArtifactName.INSTRUMENTATION,  # runtime.observe=tap: what instrumentation changed
        etrecord.parent / ArtifactName.INPUTS_RECORD,  # which samples did what (summary.json)
    ]


def _labels(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """analyze.task's labels: `analyze.labels`, else the export stage's labels.pt in the run dir
    or beside the analysed ETRecord, when there."""
    given = cfg.analyze.get("labels")
    if given:
        return [Path(str(given)).expanduser().resolve()]
    etrecord = _path_or(run_dir, cfg.analyze.etrecord, ArtifactName.ETRECORD)
    written = [d / ArtifactName.LABELS for d in (run_dir, etrecord.parent)]
    return [p for p in written if p.is_file()][:1]


def _task_files(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """The labels and a user task metric's source: editing either invalidates a cached analysis."""
    from stages.analyze.compare.task_accuracy import task_target
    from stages.python_target import target_source_file

    target = task_target(OmegaConf.select(cfg, "analyze.task"))
    source = target_source_file(target, Path.cwd()) if target else None
    return _labels(cfg, run_dir) + ([source] if source is not None else [])


def _prefix_lowerings(cfg: DictConfig, run_dir: Path) -> Any:
    """runtime.observe=bisect: how the analysis lowers and runs a prefix program (else None)."""
    if not _prefix_lowerings_on(cfg):
        return None
    from pipeline.stage_registry.prefix_lowerings import PrefixLowerings

    return PrefixLowerings(cfg, run_dir)


def _bisect_inputs(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """With runtime.observe=bisect, the backend's source file is the analysis's input too."""
    return _backend_source(cfg, run_dir) if _prefix_lowerings_on(cfg) else []


def _prefix_lowerings_on(cfg: DictConfig) -> bool:
    return str(OmegaConf.select(cfg, "runtime.observe", default="off")) == "bisect"


def _call_analyze(cfg: DictConfig, run_dir: Path) -> Any:
    from stages.analyze.stage import run_analyze

    etrecord, debug_buffer, pte, _, step_inputs, generation, tapped, _ = _analyze_optional(
        cfg, run_dir
    )
    return run_analyze(
        _to_object(cfg.analyze),
        _analyze_inputs(cfg, run_dir)[0],
        debug_buffer if debug_buffer.is_file() else None,
        etrecord if etrecord.is_file() else None,
        run_dir,
        pte=pte if pte.is_file() or cfg.analyze.pte else None,  # a missing analyze.pte: say so
        step_inputs=step_inputs if step_inputs.is_file() else None,
        generation_file=generation if generation.is_file() else None,
        instrumentation=tapped if tapped.is_file() else None,
        prefix_lowerings=_prefix_lowerings(cfg, run_dir),
        labels=next(iter(_labels(cfg, run_dir)), None),
    )


STAGES: dict[str, StageSpec] = {
    "export": StageSpec(
        "export",
        ("model", "inputs", "export", "runtime.generate.prompt_tokens", "runtime.generate.max_len"),
        "stages.export.stage",
        _export_inputs,
        _export_optional,
        _call_export,
        produced_by="config",
        digests=_export_digests,
    ),
    "lower": StageSpec(
        "lower",
        ("backend", "model.name", "runtime.observe"),
        "stages.lower.stage",
        _lower_inputs,
        _lower_optional,
        _call_lower,
        produced_by="export",
    ),
    "run": StageSpec(
        "run",
        ("runtime",),
        "stages.run.stage",
        _run_inputs,
        _backend_source,
        _call_run,
        produced_by="lower",
        timed=True,
    ),
    "analyze": StageSpec(
        "analyze",
        # runtime.observe=bisect lowers prefixes on the run's backend inside the analysis.
        ("analyze", "runtime.observe"),
        "stages.analyze.stage",
        _analyze_inputs,
        lambda cfg, run_dir: (
            _analyze_optional(cfg, run_dir)
            + _bisect_inputs(cfg, run_dir)
            + _task_files(cfg, run_dir)
        ),
        _call_analyze,
        produced_by="run",
    ),
}


def output_paths(artifacts: Any, run_dir: Path) -> dict[str, str]:
    """The Path fields of a stage's artifacts dataclass, relative to run_dir."""
    outputs: dict[str, str] = {}
    for field in dataclasses.fields(artifacts):
        value = getattr(artifacts, field.name)
        values = value if isinstance(value, tuple | list) else [value]
        for index, item in enumerate(values):
            if isinstance(item, Path):
                key = field.name if len(values) == 1 else f"{field.name}[{index}]"
                try:
                    outputs[key] = str(item.resolve().relative_to(run_dir.resolve()))
                except ValueError:
                    outputs[key] = str(item.resolve())
    return outputs


def stage_metrics(artifacts: Any) -> dict[str, float]:
    """The `metrics` field of a stage's artifacts, if it has one."""
    metrics = getattr(artifacts, "metrics", None) or {}
    return {str(k): float(v) for k, v in dict(metrics).items()}
