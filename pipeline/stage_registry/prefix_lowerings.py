"""Lower and run a bisection's prefix program on the run's backend (runtime.observe=bisect).

The analysis cuts a prefix program into a directory (stages.export.prefix_cut) and calls this
to get what the backend computes for it: the lower stage and one plain execution per sample of
the run stage, each looked up in and stored to the stage cache by fingerprint (config slice,
input files' sha256, code), so a prefix lowered before (the same cut, backend and code) is
reused. The backend's options that name ops (`backend.fault.node`, `keep_float`, `keep_off`)
follow the ops into the cut under their new names; those the cut lacks are dropped.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.cache.fingerprint import compute_fingerprint
from pipeline.cache.stage_cache import Produced, StageCache
from stages.formats.artifacts import ArtifactName
from stages.formats.executorch.program import is_executorch_backend
from stages.lower.config import BackendConfig
from stages.safe_io.file_digests import file_sha256

log = logging.getLogger(__name__)

# One plain execution per sample: outputs only, nothing traced, nothing timed worth keeping.
_RUNTIME = {
    "warmup": 0,
    "iterations": 1,
    "min_iterations": 1,
    "max_time_s": None,
    "debug_level": "none",
    "profiling_level": "none",
}
_CUT_FILES = (ArtifactName.EXPORTED_PROGRAM, ArtifactName.INPUTS, ArtifactName.REFERENCE_OUTPUTS)


def _relative_outputs(artifacts: Any, directory: Path) -> dict[str, str]:
    """The Path fields of a stage's artifacts, relative to `directory`."""
    found = {}
    for item in dataclasses.fields(artifacts):
        value = getattr(artifacts, item.name)
        if isinstance(value, Path):
            found[item.name] = str(value.resolve().relative_to(directory.resolve()))
    return found


def _fault_node(cfg: DictConfig, run_dir: Path) -> str | None:
    """The fault's target node name (a debug handle resolved on the run's exported program)."""
    fault = cfg.backend.fault
    if fault.node:
        return str(fault.node)
    if fault.debug_handle is None:
        return None
    from stages.handles.debug_handles import DEBUG_HANDLE_META
    from stages.handover.exported_program import load_exported_program

    program = load_exported_program(run_dir / ArtifactName.EXPORTED_PROGRAM)
    for node in program.graph.nodes:
        if node.meta.get(DEBUG_HANDLE_META) == int(fault.debug_handle):
            return str(node.name)
    return None


class PrefixLowerings:
    """`(cut directory, original op name -> cut name) -> (run_outputs.pt, lowering reused from
    the stage cache)` on the run's backend."""

    def __init__(self, cfg: DictConfig, run_dir: Path) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.cache = StageCache(Path(cfg.cache_dir).expanduser().resolve(), enabled=bool(cfg.cache))
        self.fault = _fault_node(cfg, run_dir)
        source = run_dir / ArtifactName.EXPORTED_PROGRAM
        self.source = file_sha256(source) if source.is_file() else ""

    def backend(self, names: dict[str, str]) -> Any:
        """The run's backend config with op names moved into the cut."""
        backend = copy.deepcopy(self.cfg.backend)
        with open_dict(backend):
            backend.fault.debug_handle = None
            backend.fault.node = names.get(self.fault) if self.fault else None
            backend.keep_float = [names[n] for n in backend.keep_float if n in names]
            backend.keep_off = [names[n] for n in backend.keep_off if n in names]
        return backend

    def _backend_source(self) -> list[Path]:
        """A user's backend source file: editing it invalidates a cached prefix lowering."""
        from stages.backends.backend_registry import BUILTIN_BACKEND_NAMES
        from stages.python_target import target_source_file

        target = str(self.cfg.backend.get("_target_") or "")
        if not target or target in BUILTIN_BACKEND_NAMES:
            return []
        source = target_source_file(target, Path.cwd())
        return [source] if source is not None else []

    def _stage(self, name: str, config: dict[str, Any], files: list[Path], call: Any) -> bool:
        """Reuse the stage's cached result for this fingerprint (True), or run `call` and store
        it (False)."""
        directory = files[0].parent
        entry = "stages.lower.stage" if name == "lower" else "stages.run.stage"
        fingerprint = compute_fingerprint(config, files, (entry,))

        def produce() -> Produced:
            artifacts = call()
            return artifacts, _relative_outputs(artifacts, directory), {}

        answer = self.cache.reuse_or_run(name, fingerprint, directory, produce)
        if answer.cached is not None:
            log.info("[analyze] bisection: %s of %s reused", name, directory.name)
        return answer.cached is not None

    def __call__(self, directory: Path, names: dict[str, str]) -> tuple[Path, bool]:
        from stages.lower.stage import run_lower
        from stages.run.config import RuntimeConfig
        from stages.run.stage import run_run

        backend = self.backend(names)
        backend_slice = OmegaConf.to_container(backend, resolve=True, enum_to_str=True)
        lower_files = [directory / f for f in _CUT_FILES]
        # The cut's exported.pt2 carries ids that differ between processes (torch.export's
        # provenance and serialization ids): it is named by its source program and its ops.
        cut = {"program": self.source, "ops": sorted(names.items())}
        reused = self._stage(
            "lower",
            {"backend": backend_slice, "model.name": "bisect_prefix", "cut": cut},
            lower_files[0 if not self.source else 1 :] + self._backend_source(),
            lambda: run_lower(
                cast(BackendConfig, OmegaConf.to_object(backend)),
                lower_files[0],
                lower_files[1],
                lower_files[2],
                directory,
                model_name="bisect_prefix",
            ),
        )
        executorch = is_executorch_backend(str(backend.name))
        program = directory / (
            ArtifactName.EXECUTORCH_PROGRAM if executorch else ArtifactName.PROGRAM
        )
        runtime = RuntimeConfig(**_RUNTIME)  # type: ignore[arg-type]
        run_files = [program, directory / ArtifactName.INPUTS]
        self._stage(
            "run",
            {"runtime": _RUNTIME},
            run_files,
            lambda: run_run(runtime, program, run_files[1], directory),
        )
        return directory / ArtifactName.RUN_OUTPUTS, reused
