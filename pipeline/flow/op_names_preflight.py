"""Op names in the options (`backend.keep_float`, `backend.keep_off`, `backend.fault.node`)
checked against the exported program before any stage runs and before anything is written.

The names are only known after the export. The check takes them from the stage cache's verified
export when it holds this fingerprint; otherwise it runs the export stage once into the cache
(a private one under `cache=false`) in a scratch directory, and the run's export stage then
reuses that result: nothing is exported twice, and a refused command leaves no run directory
and no MLflow run. An export that fails here is left to the run's export stage, which fails as
any stage does (tracked, with the command that resumes). The program is loaded once and every
name checked against it in one walk of its graph.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from omegaconf import DictConfig

from pipeline.cache.stage_cache import StageCache
from pipeline.errors import ConfigValueError
from pipeline.flow.run_plan import RunPlan
from pipeline.flow.stage_step import run_stage, stage_fingerprint
from pipeline.log_files import log_traceback_to_files
from pipeline.outcomes import StageOutcome
from pipeline.stage_registry import STAGES
from stages.formats.artifacts import ArtifactName

log = logging.getLogger("pipeline")


@dataclass
class Preflight:
    """The cache the run's export stage uses (the preflight's own under `cache=false`), the
    export stage's run when the preflight ran it, and the scratch directories removed on exit."""

    export_cache: StageCache
    scratch: list[Path] = field(default_factory=list)
    export: StageOutcome | None = None
    program: Path | None = None  # the exported program the names are checked against

    def close(self) -> None:
        for path in self.scratch:
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):  # its parent, unless another job's is in it
                path.parent.rmdir()

    def __enter__(self) -> Preflight:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def named_ops(cfg: DictConfig) -> dict[str, list[str]]:
    """The options that name ops, each with its names (empty when unset), in checking order."""
    backend = cfg.backend
    node = backend.fault.get("node")
    return {
        "backend.keep_float": [str(n) for n in (backend.get("keep_float") or [])],
        "backend.keep_off": [str(n) for n in (backend.get("keep_off") or [])],
        "backend.fault.node": [str(node)] if node else [],
    }


def _scratch(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="preflight-", dir=root))


def _exported(plan: RunPlan) -> Preflight:
    """Where the program is: the lower stage's input file when export is not selected, else
    the cache's export entry (the export run once into it, in a scratch directory)."""
    if "export" not in plan.stages:  # the lower stage's program is a file already
        return Preflight(plan.cache, program=STAGES["lower"].inputs(plan.cfg, plan.run_dir)[0])
    found = Preflight(plan.cache)
    if not plan.cache.enabled:  # a private cache the run's export stage then reuses
        private = _scratch(plan.cache.root / "preflight")
        found = Preflight(StageCache(private / "cache"), [private])
    scratch = _scratch(found.export_cache.root / "preflight-runs")
    found.scratch.append(scratch)
    export = dataclasses.replace(plan, run_dir=scratch, cache=found.export_cache)
    digest = stage_fingerprint(export, "export")[0].digest
    if found.export_cache.lookup("export", digest) is None:
        log.info("[export] run before the other stages: the options name ops of its program")
        try:
            found.export = run_stage(export, "export", lambda: None).outcome
        except Exception:  # the run's own export stage fails again, tracked and reported
            log_traceback_to_files("stage export failed")
            log.debug("[export] failed before the other stages; the run's export stage reports it")
            found.close()
            return Preflight(plan.cache)
        finally:
            gc.unfreeze()
        if found.export_cache.lookup("export", digest) is None:  # another process cleaned it
            raise RuntimeError(f"the export stage's cache entry {digest} vanished")
    found.program = found.export_cache.root / "export" / digest / "files"
    found.program /= ArtifactName.EXPORTED_PROGRAM
    return found


def check_op_names_before_stages(plan: RunPlan) -> Preflight:
    """Refuse (ConfigValueError) a name that matches no op, before any stage of the plan runs;
    the Preflight (a context manager) removes its scratch directories on exit."""
    named = named_ops(plan.cfg)
    if "lower" not in plan.stages or not any(named.values()):
        return Preflight(plan.cache)
    found = _exported(plan)
    if found.program is None or not found.program.is_file():
        return found  # the export failed, or the lower stage's own input check reports it
    from stages.handover.exported_program import load_exported_program
    from stages.lower.fault_target import operator_nodes
    from stages.lower.op_overrides import UnknownOpError, check_op_names

    try:
        program = load_exported_program(found.program)
        check_op_names(operator_nodes(program.graph_module), named)
    except UnknownOpError as exc:
        found.close()
        raise ConfigValueError(str(exc)) from exc
    except BaseException:
        found.close()
        raise
    return found
