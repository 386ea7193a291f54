"""Op names in the options (`backend.keep_float`, `backend.keep_off`, `backend.fault.node`)
checked against the exported program before any stage runs and before anything is written.

The names are only known after the export. The check takes them from the stage cache's verified
export when it holds this fingerprint; otherwise it runs the export stage once into the cache
(a private one under `cache=false`) in a scratch directory, and the run's export stage then
reuses that result: nothing is exported twice, and a refused command leaves no run directory
and no MLflow run. An export that fails here is left to the run's export stage, which fails as
any stage does (tracked, with the command that resumes).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from pipeline.cache.stage_cache import StageCache
from pipeline.config.op_override_checks import check_op_names_in
from pipeline.errors import PipelineError
from pipeline.outcomes import StageOutcome
from pipeline.stage_registry import STAGES
from stages.formats.artifacts import ArtifactName

log = logging.getLogger("pipeline")

# Runs one stage into a run dir through a cache (the runner's `_run_stage`, tracking left out).
RunStage = Callable[[str, DictConfig, Path, StageCache], StageOutcome]
# The fingerprint digest the runner computes for a stage in a run dir.
StageDigest = Callable[[str, DictConfig, Path], str]


@dataclass
class Preflight:
    """The cache the run's export stage uses (the preflight's own under `cache=false`) and the
    scratch directories to remove when the command ends."""

    export_cache: StageCache
    scratch: list[Path]
    export: StageOutcome | None = None  # the export stage's run, when the preflight ran it

    def close(self) -> None:
        for path in self.scratch:
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):  # its parent, unless another job's is in it
                path.parent.rmdir()


def named_ops_in_options(cfg: DictConfig) -> bool:
    """Any option names an op by name (what the preflight checks)."""
    backend = cfg.backend
    return bool(backend.get("keep_float") or backend.get("keep_off") or backend.fault.get("node"))


def _scratch(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="preflight-", dir=root))


def check_op_names_before_stages(
    cfg: DictConfig,
    names: list[str],
    run_dir: Path,
    cache: StageCache,
    run_stage: RunStage,
    digest_of: StageDigest,
) -> Preflight:
    """Refuse (ConfigValueError) a name that matches no op, before any stage of `names` runs."""
    found = Preflight(cache, [])
    if "lower" not in names or not named_ops_in_options(cfg):
        return found
    if "export" not in names:  # the lower stage's program is a file already
        check_op_names_in(cfg, STAGES["lower"].inputs(cfg, run_dir)[0])
        return found
    if not cache.enabled:  # a private cache the run's export stage then reuses
        private = _scratch(cache.root / "preflight")
        found = Preflight(StageCache(private / "cache"), [private])
    scratch = _scratch(found.export_cache.root / "preflight-runs")
    found.scratch.append(scratch)
    digest = digest_of("export", cfg, scratch)
    cached = found.export_cache.lookup("export", digest)
    if cached is None:
        log.info("[export] run before the other stages: the options name ops of its program")
        try:
            found.export = run_stage("export", cfg, scratch, found.export_cache)
        except PipelineError:  # the run's own export stage fails again, tracked and reported
            log.debug("[export] failed before the other stages; the run's export stage reports it")
            found.close()
            return Preflight(cache, [])
        cached = found.export_cache.lookup("export", digest)
    if cached is None:  # only when the entry vanished at once (another process cleaned it)
        raise RuntimeError(f"the export stage's cache entry {digest} vanished")
    program = found.export_cache.root / "export" / digest / "files" / ArtifactName.EXPORTED_PROGRAM
    try:
        check_op_names_in(cfg, program)
    except BaseException:
        found.close()
        raise
    return found
