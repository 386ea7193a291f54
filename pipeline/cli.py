"""The command line: `delegate-debugger ...` or `python -m pipeline ...` (a thin @hydra.main
around run_pipeline). Importing this module readies the process: the working directory can no
longer shadow the tool, and torch's OpenMP runtime waits passively."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pipeline.invocation import demote_working_directory

demote_working_directory()  # before any other project package (stages, conf) is imported

from pipeline.cpu_threads import set_passive_wait_policy  # noqa: E402

set_passive_wait_policy()  # before anything loads torch's OpenMP runtime

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from pipeline.cache.run_dirs import register_run_suffix  # noqa: E402
from pipeline.config.front_door import (  # noqa: E402
    CommandLineError,
    check_group_choices,
    more_configs,
    option_groups,
    register_help_resolvers,
    short_hydra_error,
)
from pipeline.config.location import CONFIG_NAME, config_dir  # noqa: E402
from pipeline.config.override_keys import check_override_keys  # noqa: E402
from pipeline.config.quick_help import quick_help_overrides, quick_help_text  # noqa: E402
from pipeline.config.schema import PipelineConfig, register_configs  # noqa: E402
from pipeline.errors import PipelineError, RunInterruptedError, StageFailedError  # noqa: E402
from pipeline.exits.process_end import exit_process  # noqa: E402
from pipeline.exits.refused_runs import remove_untouched_run_dir  # noqa: E402
from pipeline.exits.verdict_code import (  # noqa: E402
    ACCURACY_MISSED_EXIT_CODE,
    VERDICT_FAILED_EXIT_CODE,
    gated_verdict,
    missed_accuracy,
)
from pipeline.log_files import log_traceback_to_files  # noqa: E402
from pipeline.sweeps.job_failures import (  # noqa: E402
    FailedJob,
    FailedVerdict,
    MissedAccuracy,
    record_failed_job,
    record_failed_verdict,
    record_missed_accuracy,
)

register_configs()
register_run_suffix()
register_help_resolvers()

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what shells report for Ctrl-C


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=CONFIG_NAME)
def run_job(cfg: DictConfig) -> None:
    """Run the pipeline for one composed config (one job of a sweep)."""
    # Imported here: `--help` and composition errors never load the runner and its imports.
    from pipeline.hydra_run import run_from_hydra

    try:
        result = run_from_hydra(cfg)
    except RunInterruptedError as exc:
        # One line, no traceback: the tracking run is already KILLED, the stages done are kept.
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED_EXIT_CODE)
    except Exception as exc:
        if isinstance(exc, PipelineError):
            message = str(exc)
        else:  # a bug, not a user's mistake: the traceback goes to the log file
            log_file = log_traceback_to_files()
            where = f"; full traceback in {log_file}" if log_file else ""
            message = f"{type(exc).__name__}: {exc}{where}"
        print(f"error: {message}", file=sys.stderr)
        hydra_cfg = HydraConfig.get()
        refused = isinstance(exc, PipelineError) and not isinstance(exc, StageFailedError)
        if refused:  # before any stage: the run dir Hydra made holds nothing of a run
            remove_untouched_run_dir(Path(hydra_cfg.runtime.output_dir))
        if hydra_cfg.mode == RunMode.MULTIRUN:
            # One failed job must not abort the sweep: its marker (and child run, if tracked;
            # the callback opens one for a refused job) lets the sweep callback report it and
            # exit non-zero when all jobs are done.
            precision = str(cfg.backend.get("precision", ""))
            job = FailedJob(str(cfg.model.name), str(cfg.backend.name), message, precision, refused)
            record_failed_job(Path(hydra_cfg.runtime.output_dir), job)
            return
        sys.exit(1)
    _gate_on_verdict(cfg, result)


def _gate_on_verdict(cfg: DictConfig, result: Any) -> None:
    """A FAIL verdict exits 3, map errors 4, a missed accuracy budget 5 (a sweep job leaves a
    marker; the sweep exits at its end)."""
    gated = gated_verdict(cfg, result)
    if gated is None:
        _gate_on_accuracy(cfg, result)
        return
    failure, code = gated
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        verdict = FailedVerdict(
            str(cfg.model.name), str(cfg.backend.name), str(cfg.backend.precision), failure, code
        )
        record_failed_verdict(Path(hydra_cfg.runtime.output_dir), verdict)
        return
    label = "FAIL" if code == VERDICT_FAILED_EXIT_CODE else "MAP_ERRORS"
    keep = (
        "analyze.fail_exit_code=false exits 0"
        if code == VERDICT_FAILED_EXIT_CODE
        else "analyze.map_errors=warn lets the numbers decide"
    )
    print(f"verdict: {label} ({failure}); exit code {code} ({keep})", file=sys.stderr, flush=True)
    sys.exit(code)


def _gate_on_accuracy(cfg: DictConfig, result: Any) -> None:
    """A passing run that misses its accuracy budget exits 5 (a sweep job leaves a marker)."""
    missed = missed_accuracy(cfg, result)
    if missed is None:
        return
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        job = MissedAccuracy(
            str(cfg.model.name), str(cfg.backend.name), str(cfg.backend.precision), missed
        )
        record_missed_accuracy(Path(hydra_cfg.runtime.output_dir), job)
        return
    print(
        f"accuracy: budget MISSED ({missed}); exit code {ACCURACY_MISSED_EXIT_CODE} "
        "(analyze.accuracy_exit_code=false exits 0)",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(ACCURACY_MISSED_EXIT_CODE)


def _end_open_sweeps(killed: bool) -> None:
    """A sweep stopped before its end leaves no parent run RUNNING."""
    if "pipeline.sweeps.callback" in sys.modules:  # only sweeps load it (keeps --help light)
        from pipeline.sweeps.callback import end_open_sweeps

        end_open_sweeps(killed)


def _hydra_errors() -> tuple[type[BaseException], ...]:
    """Hydra's and OmegaConf's errors about the command line or the config (not a job's)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    return (HydraException, OmegaConfBaseException)


def main() -> None:
    """Entry point of the `delegate-debugger` command and of `python -m pipeline`: the process
    ends here, with the command's exit code and without the interpreter's teardown."""
    try:
        _command()
    except SystemExit as exc:
        exit_process(exc.code)
    exit_process(0)


def _quick_help(args: list[str]) -> None:
    """A plain `--help` printed from one compose (Hydra's own lists every config group)."""
    overrides = quick_help_overrides(args)
    text = None if overrides is None else quick_help_text(overrides)
    if text is not None:
        print(text)
        sys.exit(0)


def _command() -> None:
    """Parse, run and report; a failure raises SystemExit with its exit code."""
    # Hydra's errors reach us instead of being printed with its internals (see front_door).
    short_errors = "HYDRA_FULL_ERROR" not in os.environ
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        check_group_choices(sys.argv[1:])
        check_override_keys(
            sys.argv[1:],
            PipelineConfig,
            list(option_groups()),
            more_configs=more_configs(sys.argv[1:]),
        )
        _quick_help(sys.argv[1:])
        run_job()
    except CommandLineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except _hydra_errors() as exc:
        if not short_errors:
            raise
        print(f"error: {short_hydra_error(exc)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # outside a run: starting up, or a sweep's launcher waiting
        _end_open_sweeps(killed=True)
        print(
            "error: interrupted; run the same command again to resume (finished stages are reused)",
            file=sys.stderr,
        )
        sys.exit(INTERRUPTED_EXIT_CODE)
    except SystemExit as exc:  # a job's Ctrl-C (130) or Hydra reporting a crash
        _end_open_sweeps(killed=exc.code == INTERRUPTED_EXIT_CODE)
        raise
