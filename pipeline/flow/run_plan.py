"""What one invocation will do, settled once from the composed config before any stage: the
options checked, the stages in order, the run dir, the stage cache, the resume command."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from pipeline.cache.cache_bound import MB
from pipeline.cache.run_dirs import default_run_dir_name
from pipeline.cache.stage_cache import StageCache
from pipeline.config.options import check_options
from pipeline.errors import ConfigValueError
from pipeline.invocation import resume_command


@dataclass(frozen=True)
class RunPlan:
    """The checked options (`cfg`, what the stages read) and what the runner needs besides."""

    cfg: DictConfig
    stages: tuple[str, ...]
    run_dir: Path
    cache: StageCache
    resume: str  # the command that re-runs this invocation in its run dir
    fault: str | None  # 'scale on linear_1' for a configured backend.fault.*, else None


def bound_bytes(max_mb: int | None) -> int | None:
    """`cache_max_mb` in bytes; None (no bound) for 0 or null; a negative value is refused."""
    if max_mb is None or max_mb == 0:
        return None
    if max_mb < 0:
        raise ConfigValueError(
            f"cache_max_mb={max_mb}: give the stage cache's bound in MB (e.g. 2048), or 0 for "
            "no bound"
        )
    return int(max_mb) * MB


def plan_run(cfg: DictConfig, base_dir: Path, resume: str | None) -> RunPlan:
    """Check every option (the named error of the first mistake), then settle the invocation:
    the run dir (Hydra's, else a new one under outputs/runs), the cache, the resume command."""
    bound = bound_bytes(cfg.get("cache_max_mb"))
    stages = tuple(check_options(cfg, base_dir))
    if cfg.get("run_dir"):
        run_dir = Path(cfg.run_dir).expanduser().resolve()
    else:
        name = default_run_dir_name(str(cfg.model.name), str(cfg.backend.name))
        run_dir = (Path("outputs") / "runs" / name).resolve()
    cache = StageCache(Path(cfg.cache_dir).expanduser().resolve(), bool(cfg.cache), bound)
    fault = cfg.backend.get("fault")
    asked = fault is not None and (fault.get("node") or fault.get("debug_handle") is not None)
    described = f"{fault.kind} on {fault.node or f'handle {fault.debug_handle}'}" if asked else None
    return RunPlan(cfg, stages, run_dir, cache, resume or resume_command(run_dir), described)
