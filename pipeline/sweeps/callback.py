"""Hydra callback for sweeps: one parent MLflow run, child runs per job, a comparison at the end.

The store and experiment are created here, before any job starts (parallel creation of a new
sqlite store crashes MLflow); jobs find the parent through $PIPELINE_PARENT_RUN_ID.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from pipeline.cache.run_dirs import register_run_suffix
from pipeline.exits.verdict_code import ACCURACY_MISSED_EXIT_CODE, VERDICT_FAILED_EXIT_CODE
from pipeline.searches.exit_codes import exit_for_search, search_files
from pipeline.sweeps.job_failures import failed_jobs, failed_verdicts, missed_accuracies
from pipeline.sweeps.parallel_launch import start_early
from pipeline.tracking.client import log_metric_values, tracking_client
from pipeline.tracking.factory import PARENT_RUN_ENV, resolve_tracking_uri
from pipeline.tracking.liveness import process_tags
from pipeline.tracking.mlflow_tracker import ensure_experiment, server_reachable
from pipeline.tracking.offline_sync import sync_sweep_jobs
from pipeline.tracking.store import artifact_root_for
from pipeline.tracking.tables import log_csv_table

log = logging.getLogger("pipeline")
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"

# Launcher workers (joblib, submitit) unpickle this callback before they resolve the sweep dir.
register_run_suffix()


_OPEN: list[SweepTracking] = []  # sweeps whose parent run is not ended yet


def end_open_sweeps(killed: bool) -> None:
    """End the parent runs of sweeps stopped before their end (Ctrl-C: KILLED; else FAILED)."""
    os.environ.pop(PARENT_RUN_ENV, None)
    while _OPEN:
        sweep = _OPEN.pop()
        reason = (
            "interrupted by the user (Ctrl-C)" if killed else "the sweep stopped before its end"
        )
        try:
            sweep.client.set_tag(sweep.parent_id, "error", reason)
            sweep.client.set_terminated(sweep.parent_id, status="KILLED" if killed else "FAILED")
        except Exception as exc:  # the store may be what failed; the next start marks it
            log.warning("could not end sweep parent run %s: %s", sweep.parent_id, exc)


class SweepFailedError(SystemExit):
    """Some jobs of the sweep failed (the others finished and are recorded)."""


class SweepVerdictFailedError(SystemExit):
    """Every job finished, and some verdicts failed (exit code 3, apart from failed jobs)."""


class SweepTracking(Callback):
    """Parent run around a multirun; comparison artifact and failure count when it ends."""

    def __init__(self) -> None:
        self.client: Any = None
        self.parent_id: str | None = None
        self.experiment_id: str | None = None
        self.uri: str | None = None
        self._set_uri_env = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        start_early(config)  # the sweep's workers load torch while the parent run is set up
        tracking = config.tracking
        if not tracking.enabled:
            return
        uri = resolve_tracking_uri(tracking)
        if not server_reachable(uri):
            log.warning("sweep: tracking server %s unreachable; each job logs locally", uri)
            return
        root = artifact_root_for(uri)
        self.uri = uri
        self.experiment_id = ensure_experiment(uri, str(tracking.experiment), root)
        self.client = tracking_client(uri)
        overrides = list(OmegaConf.select(config, "hydra.overrides.task") or [])
        sweep_dir = str(Path(str(config.hydra.sweep.dir)).resolve())
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"sweep {Path(sweep_dir).name}",
            tags={
                "sweep": "parent",
                "sweep_dir": sweep_dir,
                "overrides": " ".join(overrides),
                **process_tags(),  # so a later start can mark it KILLED if this process dies
            },
        )
        self.parent_id = run.info.run_id
        _OPEN.append(self)
        os.environ[PARENT_RUN_ENV] = self.parent_id
        log.info("sweep: parent MLflow run %s at %s", self.parent_id, uri)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """In the job's own process: the parent run (and the sweep's store when no tracking.uri
        is set) come from this callback, not the environment, which a job started by a Ray or
        SLURM cluster (`--export=NONE`) does not inherit from the sweep command."""
        if self.parent_id is None or self.uri is None:
            return
        os.environ[PARENT_RUN_ENV] = self.parent_id
        if not config.tracking.uri and os.environ.get(TRACKING_URI_ENV) != self.uri:
            os.environ[TRACKING_URI_ENV] = self.uri
            self._set_uri_env = True  # the basic launcher runs jobs in this very process

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ.pop(PARENT_RUN_ENV, None)
        if self._set_uri_env:
            os.environ.pop(TRACKING_URI_ENV, None)
        if self in _OPEN:
            _OPEN.remove(self)
        sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
        # Markers count failures under every tracking setting; failed child runs add jobs that
        # died without writing one.
        failed = [f"{job.model}/{job.backend}" for job in failed_jobs(sweep_dir)]
        marked = failed_verdicts(sweep_dir)
        verdicts = [f"{v.model}/{v.backend}/{v.precision}" for v in marked]
        # A FAIL anywhere exits 3; only map errors (every verdict numeric pass) exit 4.
        code = min((v.exit_code for v in marked), default=VERDICT_FAILED_EXIT_CODE)
        search = OmegaConf.select(config, "search.kind") is not None
        if self.client is not None and self.parent_id is not None:
            self._upload_offline_jobs(sweep_dir)
            self._record_refused_jobs(self.parent_id, sweep_dir)
            failed_runs = self._finish_parent(
                self.parent_id, sweep_dir, bool(failed), verdicts, quiet=search
            )
            failed = failed or failed_runs
        elif not search:  # a search's summary is search.json's (its driver printed it)
            self._compare_job_dirs(sweep_dir, len(failed), len(verdicts))
        if search:
            # A search's trials fail on purpose; the search's own outcome decides the exit.
            self._log_search(sweep_dir)
            exit_for_search(sweep_dir)
            return
        missed = [f"{m.model}/{m.backend}/{m.precision}" for m in missed_accuracies(sweep_dir)]
        _exit_on_failures(failed, verdicts, missed, code)

    def _log_search(self, sweep_dir: Path) -> None:
        """search.json and a precision search's sensitivity files on the parent run."""
        if self.client is None or self.parent_id is None:
            return
        for path in search_files(sweep_dir):
            self.client.log_artifact(self.parent_id, str(path), "search")

    @staticmethod
    def _compare_job_dirs(sweep_dir: Path, failed: int, verdicts: int) -> None:
        """Tracking off: the comparison is read from the job dirs and written beside them."""
        from pipeline.sweeps.comparison import compare_sources  # torch: only when a sweep ends
        from pipeline.sweeps.run_sources import sweep_dir_sources

        sources = sweep_dir_sources(sweep_dir)
        out_dir = sweep_dir / "comparison"
        comparison = compare_sources(sources, out_dir)
        print(
            f"\n== sweep: {len(sources)} jobs, {failed} failed, {verdicts} failed verdict(s) "
            "(not tracked) =="
        )
        print(f"{comparison.text}\ncomparison: {out_dir}", flush=True)

    def _record_refused_jobs(self, parent_id: str, sweep_dir: Path) -> None:
        """A job refused before any stage (a bad option for this model) opened no run: a FAILED
        child run with its error keeps every combination of the sweep visible in MLflow."""
        for job in failed_jobs(sweep_dir):
            if not job.refused:
                continue
            tags = {
                "mlflow.parentRunId": parent_id,
                "model": job.model,
                "backend": job.backend,
                "precision": job.precision,
                "error": job.error,
                "refused": "before any stage",
            }
            name = f"{job.model}-{job.backend}-{job.precision}".rstrip("-")
            run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
            self.client.set_terminated(run.info.run_id, status="FAILED")

    def _upload_offline_jobs(self, sweep_dir: Path) -> None:
        """Jobs that found the server down logged to their run dir: upload them under the parent."""
        if self.uri is None or not server_reachable(self.uri):
            return
        synced = sync_sweep_jobs(sweep_dir, self.uri)
        if synced:
            log.warning(
                "sweep: %d job run(s) logged offline while %s was unreachable; uploaded now",
                len(synced),
                self.uri,
            )

    def _finish_parent(
        self, parent_id: str, sweep_dir: Path, failed: bool, verdicts: list[str], quiet: bool
    ) -> list[str]:
        """Comparison artifacts, job counts and the final status of the parent run (`quiet`: the
        comparison table not printed); returns the model/backend of each failed child run."""
        children = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'"
        )
        out_dir = sweep_dir / "comparison"
        from pipeline.sweeps.comparison import compare_runs  # torch: only when a sweep ends

        comparison = compare_runs(self.client, children, out_dir)
        files = [comparison.runs, *comparison.per_op] + (
            [comparison.plot] if comparison.plot else []
        )
        for path in files:
            self.client.log_artifact(parent_id, str(path), "comparison")
        for path in files:
            if path.suffix == ".csv":
                log_csv_table(self.client, parent_id, path, f"tables/{path.stem}.json")
        failed_runs = [c for c in children if c.info.status != "FINISHED"]
        log_metric_values(
            self.client,
            parent_id,
            {
                "sweep.jobs": len(children),
                "sweep.failed_jobs": len(failed_runs),
                "sweep.failed_verdicts": len(verdicts),
            },
        )
        status = "FAILED" if failed or failed_runs else "FINISHED"
        self.client.set_terminated(parent_id, status=status)
        if quiet:
            print(f"parent MLflow run: {parent_id} ({len(children)} trial runs)", flush=True)
            return [f"{c.data.tags.get('model')}/{c.data.tags.get('backend')}" for c in failed_runs]
        print(
            f"\n== sweep: {len(children)} jobs, {len(failed_runs)} failed, "
            f"{len(verdicts)} failed verdict(s) ==\n{comparison.text}"
        )
        print(f"comparison: {out_dir}\nparent MLflow run: {parent_id}", flush=True)
        return [f"{c.data.tags.get('model')}/{c.data.tags.get('backend')}" for c in failed_runs]


def _exit_on_failures(
    failed: list[str],
    verdicts: list[str],
    missed: list[str],
    code: int = VERDICT_FAILED_EXIT_CODE,
) -> None:
    """Exit 1 when a job failed (naming failed verdicts too), else 3 when a verdict failed
    (`code` 4 when every failed verdict is map errors), else 5 when a job missed its accuracy
    budget."""
    note = f"; {len(verdicts)} verdict(s) FAIL: {', '.join(verdicts)}" if verdicts else ""
    if failed:
        raise SweepFailedError(
            f"error: {len(failed)} sweep job(s) failed: {', '.join(failed)}{note}"
        )
    if verdicts:
        print(
            f"verdict: {len(verdicts)} sweep job(s) "
            f"{'FAIL their verdict' if code == VERDICT_FAILED_EXIT_CODE else 'have map errors'}"
            f": {', '.join(verdicts)}; exit code {code} (analyze.fail_exit_code=false exits 0)",
            file=sys.stderr,
            flush=True,
        )
        raise SweepVerdictFailedError(code)
    if missed:
        print(
            f"accuracy: {len(missed)} sweep job(s) missed analyze.accuracy_budget: "
            f"{', '.join(missed)}; exit code {ACCURACY_MISSED_EXIT_CODE} "
            "(analyze.accuracy_exit_code=false exits 0)",
            file=sys.stderr,
            flush=True,
        )
        raise SweepVerdictFailedError(ACCURACY_MISSED_EXIT_CODE)
