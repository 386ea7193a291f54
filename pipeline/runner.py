"""`run_pipeline(cfg)`: run the selected stages in order, reuse finished ones, track everything."""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from pipeline.cache.cache_bound import bound_bytes
from pipeline.cache.fingerprint import Fingerprint, compute_fingerprint, explain_change
from pipeline.cache.run_dirs import default_run_dir_name
from pipeline.cache.stage_cache import StageCache
from pipeline.config.options import check_options
from pipeline.config.schema import STAGE_ORDER
from pipeline.cpu_threads import apply_threads, choose_threads
from pipeline.errors import RunInterruptedError, StageFailedError, StageSelectionError
from pipeline.invocation import command_prefix
from pipeline.log_files import log_traceback_to_files
from pipeline.op_names_preflight import Preflight, check_op_names_before_stages
from pipeline.outcomes import PipelineResult, StageOutcome, StageStatus
from pipeline.stage_registry import STAGES, output_paths, stage_metrics
from pipeline.terminal_summary import format_summary
from pipeline.tracking.deferred import DeferredTracker
from pipeline.tracking.dependency_logs import keep_dependency_noise_in_log_files
from pipeline.tracking.factory import PARENT_RUN_ENV, make_tracker, resolve_tracking_uri
from pipeline.tracking.mlflow_tracker import Tracker, git_commit
from pipeline.tracking.ui_links import view_hint
from pipeline.tracking.unchanged_runs import (
    invocation_key,
    remember_tracking_run,
    unchanged_tracking_run,
)
from stages.formats.artifacts import legacy_hint

log = logging.getLogger("pipeline")


def default_resume_command(run_dir: Path) -> str:
    """The command line that re-runs this invocation in the same run dir."""
    args = [a for a in sys.argv[1:] if not a.startswith("hydra.run.dir=")]
    return shlex.join([*command_prefix(), *args, f"hydra.run.dir={run_dir}"])


def _check_inputs(name: str, cfg: DictConfig, run_dir: Path) -> list[Path]:
    spec = STAGES[name]
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


def _stage_fingerprint(name: str, cfg: DictConfig, run_dir: Path) -> tuple[Fingerprint, int]:
    """The stage's fingerprint in `run_dir` and the torch threads it runs with."""
    spec = STAGES[name]
    inputs = _check_inputs(name, cfg, run_dir)
    config_slice = {key: _config_value(cfg, key) for key in spec.config_keys}
    threads = choose_threads(timed=spec.timed)
    if spec.timed:
        config_slice["torch_threads"] = threads
    return compute_fingerprint(config_slice, inputs, (spec.entry_module,)), threads


def _stage_digest(name: str, cfg: DictConfig, run_dir: Path) -> str:
    return _stage_fingerprint(name, cfg, run_dir)[0].digest


def _run_stage(
    name: str, cfg: DictConfig, run_dir: Path, cache: StageCache, before_running: Callable[[], None]
) -> StageOutcome:
    spec = STAGES[name]
    fingerprint, threads = _stage_fingerprint(name, cfg, run_dir)
    digest = fingerprint.digest
    started = time.perf_counter()
    with cache.lock(name, digest):
        cached = cache.lookup(name, digest)
        if cached is not None:
            cache.restore(name, digest, cached, run_dir)
            artifacts = _rebuild(cached.outputs, cached.extra, run_dir)
            reason = (
                f"fingerprint {digest} matches the run finished {cached.finished_at} "
                f"in {cached.source_run_dir}"
            )
            log.info("[%s] reused: %s", name, reason)
            seconds = time.perf_counter() - started
            reused_threads = cached.extra.get("torch_threads")
            return StageOutcome(
                name, StageStatus.reused, seconds, artifacts, reason, digest, reused_threads
            )
        previous = cache.previous_fingerprint(name, run_dir)
        if not cache.enabled:
            reason = "cache=false, nothing is reused"
        elif previous is not None:
            reason = explain_change(previous, fingerprint)
        else:
            reason = "no finished run with this fingerprint"
        log.debug("[%s] running (%s)", name, reason)
        before_running()
        apply_threads(threads)
        # What exists now (torch, the loaded model) is left out of cyclic collections during the
        # stage: they walked that whole heap and took ~0.4 s of the export stage. Collections
        # still run for what the stage creates; run_pipeline unfreezes at the end.
        gc.freeze()
        artifacts = spec.call(cfg, run_dir)
        outputs = output_paths(artifacts, run_dir)
        extra = {"metrics": stage_metrics(artifacts), "torch_threads": threads}
        cache.store(name, fingerprint, outputs, extra, run_dir)
    seconds = time.perf_counter() - started
    log.info(
        "[%s] done in %.2f s with %d torch thread(s) (ran: %s)", name, seconds, threads, reason
    )
    return StageOutcome(name, StageStatus.done, seconds, artifacts, reason, digest, threads)


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


def _rebuild(outputs: dict[str, str], extra: dict[str, Any], run_dir: Path) -> ReusedArtifacts:
    paths = {key: (run_dir / rel) for key, rel in outputs.items()}
    return ReusedArtifacts(paths=paths, metrics=dict(extra.get("metrics", {})))


def _artifact_files(artifacts: Any, run_dir: Path) -> list[Path]:
    if isinstance(artifacts, ReusedArtifacts):
        return list(artifacts.paths.values())
    return [run_dir / rel for rel in output_paths(artifacts, run_dir).values()]


def _resolve_run_dir(cfg: DictConfig) -> Path:
    if cfg.get("run_dir"):
        return Path(cfg.run_dir).expanduser().resolve()
    name = default_run_dir_name(str(cfg.model.name), str(cfg.backend.name))
    return (Path("outputs") / "runs" / name).resolve()


def _attach_log_file(run_dir: Path) -> logging.Handler | None:
    """Without Hydra's job logging, still keep a log file in the run dir."""
    root = logging.getLogger()
    if any(isinstance(h, logging.FileHandler) for h in root.handlers):
        return None
    handler = logging.FileHandler(run_dir / "pipeline.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] %(message)s"))
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler


def _ignore_sigint() -> Any:
    """Ignore further Ctrl-C (main thread only); the handler to restore, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_stages(
    names: list[str],
    cfg: DictConfig,
    run_dir: Path,
    cache: StageCache,
    tracker: DeferredTracker,
    resume: str,
    result: PipelineResult,
    preflight: Preflight,
) -> None:
    """Run or reuse each stage in order, tracking its outcome, metrics and artifacts."""
    for index, name in enumerate(names, start=1):
        log.debug("[%d/%d] %s", index, len(names), name)
        try:
            if name == "export" and preflight.export is not None:
                outcome = _preflight_export(cfg, run_dir, preflight.export, preflight, tracker)
            else:
                stage_cache = preflight.export_cache if name == "export" else cache
                outcome = _run_stage(name, cfg, run_dir, stage_cache, tracker.begin)
        except StageSelectionError:
            tracker.set_tags({f"stage.{name}": StageStatus.failed.value})
            raise
        except Exception as exc:
            log_file = log_traceback_to_files(f"stage {name} failed")  # not the terminal
            tracker.set_tags({f"stage.{name}": StageStatus.failed.value})
            raise StageFailedError(name, exc, resume, log_file) from exc
        except KeyboardInterrupt:
            tracker.set_tags({f"stage.{name}": StageStatus.interrupted.value})
            raise
        result.stages.append(outcome)
        tracker.set_tags({f"stage.{name}": outcome.status.value})
        if outcome.torch_threads is not None:
            tracker.log_params({f"torch_threads.{name}": str(outcome.torch_threads)})
        metrics = {f"{name}.{k}": v for k, v in stage_metrics(outcome.artifacts).items()}
        metrics[f"time.{name}_s"] = round(outcome.seconds, 3)  # the whole stage, wall clock
        tracker.log_metrics(metrics)
        if metrics.get("lower.fault_injected"):  # recorded only when a fault was applied
            tracker.set_tags({"fault_injected": _fault_description(cfg) or "yes"})
        files = _artifact_files(outcome.artifacts, run_dir)
        tracker.log_artifacts(files, name)
        for path in files:
            if path.suffix == ".csv":
                tracker.log_table(path, f"tables/{path.stem}.json")


def _preflight_export(
    cfg: DictConfig,
    run_dir: Path,
    ran: StageOutcome,
    preflight: Preflight,
    tracker: DeferredTracker,
) -> StageOutcome:
    """The export the op-name check ran, put into the run dir: reported as done, not reused."""
    tracker.begin()
    reused = _run_stage("export", cfg, run_dir, preflight.export_cache, tracker.begin)
    reason = "run before the other stages: the options name ops of its program"
    return dataclasses.replace(
        reused, status=StageStatus.done, seconds=ran.seconds + reused.seconds, reason=reason
    )


def _fault_description(cfg: DictConfig) -> str | None:
    """'scale on linear_1' for a configured `backend.fault.*`, else None."""
    fault = cfg.backend.get("fault")
    if fault is None or (not fault.get("node") and fault.get("debug_handle") is None):
        return None
    return f"{fault.kind} on {fault.node or f'handle {fault.debug_handle}'}"


def _start_tracking(tracker: Tracker, cfg: DictConfig, run_dir: Path, names: list[str]) -> None:
    """Open the invocation's tracking run: its name, the config as params, the tags."""
    tags = {
        "model": str(cfg.model.name),
        "backend": str(cfg.backend.name),
        "precision": str(cfg.backend.precision),
        "git_commit": git_commit(),
        "run_dir": str(run_dir),
        "stages": ",".join(names),
    }
    fault = _fault_description(cfg)
    if fault:
        tags["fault_requested"] = fault  # `fault_injected` once the lower stage applied it
    container = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    run_name = (
        cfg.tracking.run_name or f"{cfg.model.name}-{cfg.backend.name}-{cfg.backend.precision}"
    )
    tracker.start(run_name, container, tags, OmegaConf.to_yaml(cfg, resolve=True))


def _end_tracking(
    tracker: Tracker,
    run_dir: Path,
    result: PipelineResult,
    *,
    failed: bool,
    error: str | None = None,
    killed: bool = False,
) -> None:
    """Log the run dir's log files, end the tracking run, note where it is."""
    for stream in logging.getLogger().handlers:
        if isinstance(stream, logging.FileHandler):
            stream.flush()
    try:
        tracker.log_artifacts(sorted(run_dir.glob("*.log")), "logs")
    except Exception:
        if not failed:  # when already failing, the first error is the one to report
            raise
    finally:
        tracker.finish(failed=failed, error=error, killed=killed)
        result.tracking, result.tracking_run_id = tracker.describe(), tracker.run_id


def _invocation_key(cfg: DictConfig, result: PipelineResult, uri: str) -> str:
    config = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    return invocation_key(config, [outcome.digest for outcome in result.stages], uri)


def _finish_tracking(
    tracker: DeferredTracker, cfg: DictConfig, result: PipelineResult, own_tracker: bool
) -> None:
    """End tracking after every stage finished: no duplicate run for an unchanged re-run."""
    eligible = (
        own_tracker and cfg.tracking.enabled and cfg.cache and not os.environ.get(PARENT_RUN_ENV)
    )
    cache_dir = Path(cfg.cache_dir).expanduser().resolve()
    uri = resolve_tracking_uri(cfg.tracking)
    key = _invocation_key(cfg, result, uri) if eligible else ""
    reused = all(o.status == StageStatus.reused for o in result.stages)
    if eligible and reused and not cfg.tracking.log_unchanged and not tracker.begun:
        earlier = unchanged_tracking_run(cache_dir, key, uri)
        if earlier is not None:
            tracker.abandon()
            result.tracking_run_id = earlier
            result.tracking = (
                f"unchanged: MLflow run {earlier} in {uri} holds these results (same config, "
                "every stage reused; tracking.log_unchanged=true logs a new run); " + view_hint(uri)
            )
            return
    _end_tracking(tracker, result.run_dir, result, failed=False)
    if eligible and result.tracking_run_id and getattr(tracker.inner, "uri", None) == uri:
        remember_tracking_run(cache_dir, key, uri, result.tracking_run_id, result.run_dir)


def run_pipeline(
    cfg: DictConfig,
    *,
    resume_command: str | None = None,
    tracker: Tracker | None = None,
    print_summary: bool = True,
    base_dir: Path | None = None,
) -> PipelineResult:
    """Run `cfg.stages` in order into `cfg.run_dir`; usable with or without Hydra.

    `base_dir` (default: the working directory) is where relative model file paths start."""
    keep_dependency_noise_in_log_files()  # Hydra's handlers exist; checks may import ExecuTorch
    names = check_options(cfg, base_dir or Path.cwd())
    bound = bound_bytes(cfg.get("cache_max_mb"))
    run_dir = _resolve_run_dir(cfg)
    cache = StageCache(Path(cfg.cache_dir).expanduser().resolve(), bool(cfg.cache), bound)
    preflight = check_op_names_before_stages(
        cfg, names, run_dir, cache, _preflight_stage, _stage_digest
    )
    try:
        return _run_checked(
            cfg, names, run_dir, cache, preflight, resume_command, tracker, print_summary
        )
    finally:
        preflight.close()


def _preflight_stage(name: str, cfg: DictConfig, run_dir: Path, cache: StageCache) -> StageOutcome:
    """A stage run by the op-name check: no tracking run is open yet."""
    try:
        return _run_stage(name, cfg, run_dir, cache, lambda: None)
    except Exception as exc:
        log_file = log_traceback_to_files(f"stage {name} failed")
        resume = default_resume_command(_resolve_run_dir(cfg))
        raise StageFailedError(name, exc, resume, log_file) from exc
    finally:
        gc.unfreeze()


def _run_checked(
    cfg: DictConfig,
    names: list[str],
    run_dir: Path,
    cache: StageCache,
    preflight: Preflight,
    resume_command: str | None,
    tracker: Tracker | None,
    print_summary: bool,
) -> PipelineResult:
    """run_pipeline once the options are checked: the run dir, tracking, the stages, the summary."""
    run_dir.mkdir(parents=True, exist_ok=True)
    _check_inputs(names[0], cfg, run_dir)  # before a tracking run exists: a typo leaves none
    own_tracker = tracker is None
    # First: a tracking process starts importing MLflow while the stages run.
    deferred = DeferredTracker(tracker or make_tracker(cfg.tracking, run_dir))
    handler = _attach_log_file(run_dir)
    resume = resume_command or default_resume_command(run_dir)
    result = PipelineResult(run_dir=run_dir)
    previous_sigint = None
    try:
        _start_tracking(deferred, cfg, run_dir, names)
        _run_stages(names, cfg, run_dir, cache, deferred, resume, result, preflight)
    except KeyboardInterrupt:
        previous_sigint = _ignore_sigint()  # a second Ctrl-C must not cut the bookkeeping short
        error = "interrupted by the user (Ctrl-C)"
        _end_tracking(deferred, run_dir, result, failed=True, error=error, killed=True)
        raise RunInterruptedError(resume) from None
    except BaseException as exc:
        _end_tracking(deferred, run_dir, result, failed=True, error=f"{type(exc).__name__}: {exc}")
        raise
    else:
        _finish_tracking(deferred, cfg, result, own_tracker)
    finally:
        gc.unfreeze()  # frozen objects become collectable again (a sweep runs many invocations)
        if handler is not None:
            logging.getLogger().removeHandler(handler)
            handler.close()
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
    if print_summary:
        print(format_summary(result), flush=True)
    return result
