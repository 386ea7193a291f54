"""A failed sweep job (or a job whose verdict failed) leaves a marker in its job dir, so the sweep's
exit code needs no tracking."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from stages.formats.atomic_write import write_text_atomic

FAILED_JOB_MARKER = ".pipeline/job_failed.json"
FAILED_VERDICT_MARKER = ".pipeline/verdict_failed.json"


@dataclass(frozen=True)
class FailedJob:
    """Which job failed and why (read back by the sweep callback)."""

    model: str
    backend: str
    error: str


def record_failed_job(job_dir: Path, job: FailedJob) -> None:
    """Write the marker into the job's own dir (every launcher gives each job one)."""
    marker = job_dir / FAILED_JOB_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(marker, json.dumps(asdict(job)))


def failed_jobs(sweep_dir: Path) -> list[FailedJob]:
    """The failed jobs of a sweep, in job-dir order."""
    markers = sorted(sweep_dir.glob(f"*/{FAILED_JOB_MARKER}"))
    return [FailedJob(**json.loads(m.read_text())) for m in markers]


@dataclass(frozen=True)
class FailedVerdict:
    """A job that ran to the end with a FAIL verdict (counted apart from failed jobs)."""

    model: str
    backend: str
    precision: str
    reason: str


def record_failed_verdict(job_dir: Path, verdict: FailedVerdict) -> None:
    marker = job_dir / FAILED_VERDICT_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(marker, json.dumps(asdict(verdict)))


def failed_verdicts(sweep_dir: Path) -> list[FailedVerdict]:
    """The jobs of a sweep whose verdict failed, in job-dir order."""
    markers = sorted(sweep_dir.glob(f"*/{FAILED_VERDICT_MARKER}"))
    return [FailedVerdict(**json.loads(m.read_text())) for m in markers]
