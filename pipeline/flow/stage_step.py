"""One stage in a run dir: its inputs checked, its fingerprint, then one call to the stage cache
(reuse a verified entry, or run the stage and store it); the outcome the runner records."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from pipeline.cache.fingerprint import Fingerprint, compute_fingerprint, why_stage_runs
from pipeline.cache.stage_cache import Produced
from pipeline.config.schema import STAGE_ORDER
from pipeline.cpu_threads import apply_threads, choose_threads
from pipeline.errors import StageSelectionError
from pipeline.flow.run_plan import RunPlan
from pipeline.outcomes import StageOutcome, StageStatus
from pipeline.stage_registry import STAGES, output_paths, stage_metrics
from stages.formats.artifacts import legacy_hint

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class ReusedArtifacts:
    """A reused stage's outputs, rebuilt from its cache record."""

    paths: dict[str, Path]
    metrics: dict[str, float]

    def __getattr__(self, item: str) -> Path:
        try:
            return self.paths[item]
        except KeyError as exc:
            raise AttributeError(item) from exc


def check_inputs(plan: RunPlan, name: str) -> list[Path]:
    """The stage's input files in the plan's run dir (optional ones where they exist);
    StageSelectionError naming the earlier stage to run when a required one is missing."""
    spec, cfg, run_dir = STAGES[name], plan.cfg, plan.run_dir
    inputs = spec.inputs(cfg, run_dir)
    missing = [p for p in inputs if not p.is_file()]
    if missing:
        raise StageSelectionError(
            f"stage '{name}' needs {', '.join(str(p) + legacy_hint(p) for p in missing)}, "
            f"which stage "
            f"'{spec.produced_by}' writes. Run the earlier stages in this run dir first "
            f"(e.g. stages=[{','.join(STAGE_ORDER[: STAGE_ORDER.index(name) + 1])}] "
            f"hydra.run.dir={run_dir}) or point the stage at existing files."
        )
    return inputs + [p for p in spec.optional_inputs(cfg, run_dir) if p.is_file()]


def _config_value(cfg: DictConfig, key: str) -> Any:
    """A config group as plain data, or one dotted value ("model.name")."""
    value = OmegaConf.select(cfg, key)
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True, enum_to_str=True)
    return value.name if isinstance(value, Enum) else value


def stage_fingerprint(plan: RunPlan, name: str) -> tuple[Fingerprint, int]:
    """The stage's fingerprint in the plan's run dir and the torch threads it runs with."""
    spec = STAGES[name]
    inputs = check_inputs(plan, name)
    config_slice = {key: _config_value(plan.cfg, key) for key in spec.config_keys}
    threads = choose_threads(timed=spec.timed)
    if spec.timed:
        config_slice["torch_threads"] = threads
    digests = spec.digests(plan.cfg)
    return compute_fingerprint(config_slice, inputs, (spec.entry_module,), digests), threads


@dataclass(frozen=True)
class StageRun:
    """A stage's outcome, with the metrics and files it recorded (for tracking)."""

    outcome: StageOutcome
    metrics: dict[str, float]
    files: list[Path]


def run_stage(plan: RunPlan, name: str, before_running: Callable[[], None]) -> StageRun:
    """Reuse or run stage `name` in the plan's run dir through the plan's cache;
    `before_running` is called only when it runs."""
    spec, cfg, run_dir = STAGES[name], plan.cfg, plan.run_dir
    fingerprint, threads = stage_fingerprint(plan, name)
    why_run = why_stage_runs(name, fingerprint, run_dir)

    def produce() -> Produced:
        before_running()
        apply_threads(threads)
        # What exists now (torch, the loaded model) is left out of cyclic collections during the
        # stage: they walked that whole heap and took ~0.4 s of the export stage. Collections
        # still run for what the stage creates; the runner unfreezes at the end.
        gc.freeze()
        artifacts = spec.call(cfg, run_dir)
        extra = {"metrics": stage_metrics(artifacts), "torch_threads": threads}
        return artifacts, output_paths(artifacts, run_dir), extra

    started = time.perf_counter()
    answer = plan.cache.reuse_or_run(name, fingerprint, run_dir, produce, why_run)
    seconds = time.perf_counter() - started
    files = [run_dir / rel for rel in answer.outputs.values()]
    metrics = {str(k): float(v) for k, v in dict(answer.extra.get("metrics") or {}).items()}
    if answer.cached is not None:
        log.info("[%s] reused: %s", name, answer.reason)
        reused = ReusedArtifacts(dict(zip(answer.outputs, files, strict=True)), metrics)
        outcome = StageOutcome(
            name,
            StageStatus.reused,
            seconds,
            reused,
            answer.reason,
            fingerprint.digest,
            answer.extra.get("torch_threads"),
        )
        return StageRun(outcome, metrics, files)
    log.info(
        "[%s] done in %.2f s with %d torch thread(s) (ran: %s)",
        name,
        seconds,
        threads,
        answer.reason,
    )
    outcome = StageOutcome(
        name,
        StageStatus.done,
        seconds,
        answer.artifacts,
        answer.reason,
        fingerprint.digest,
        threads,
    )
    return StageRun(outcome, metrics, files)
