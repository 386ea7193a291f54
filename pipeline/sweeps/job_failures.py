"""A failed sweep job (or a job whose verdict failed) leaves a marker in its job dir, so the sweep's
exit code needs no tracking."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from stages.safe_io.atomic_write import write_text_atomic

FAILED_JOB_MARKER = ".pipeline/job_failed.json"
FAILED_VERDICT_MARKER = ".pipeline/verdict_failed.json"
MISSED_ACCURACY_MARKER = ".pipeline/accuracy_missed.json"

Marker = TypeVar("Marker")


@dataclass(frozen=True)
class FailedJob:
    """Which job failed and why (read back by the sweep callback)."""

    model: str
    backend: str
    error: str
    precision: str = ""
    refused: bool = False  # refused before any stage: the job opened no tracking run


@dataclass(frozen=True)
class FailedVerdict:
    """A job that ran to the end with a FAIL verdict (counted apart from failed jobs)."""

    model: str
    backend: str
    precision: str
    reason: str
    exit_code: int = 3  # 3 a FAIL verdict, 4 map errors (pipeline/exits/verdict_code.py)


@dataclass(frozen=True)
class MissedAccuracy:
    """A job whose verdict passed and whose outputs missed `analyze.accuracy_budget`."""

    model: str
    backend: str
    precision: str
    reason: str


def _write(job_dir: Path, name: str, record: Any) -> None:
    """Write a marker into the job's own dir (every launcher gives each job one)."""
    marker = job_dir / name
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(marker, json.dumps(asdict(record)))


def _read(sweep_dir: Path, name: str, kind: type[Marker]) -> list[Marker]:
    """The markers of one kind in a sweep, in job-dir order."""
    return [kind(**json.loads(m.read_text())) for m in sorted(sweep_dir.glob(f"*/{name}"))]


def record_failed_job(job_dir: Path, job: FailedJob) -> None:
    _write(job_dir, FAILED_JOB_MARKER, job)


def failed_jobs(sweep_dir: Path) -> list[FailedJob]:
    return _read(sweep_dir, FAILED_JOB_MARKER, FailedJob)


def record_failed_verdict(job_dir: Path, verdict: FailedVerdict) -> None:
    _write(job_dir, FAILED_VERDICT_MARKER, verdict)


def failed_verdicts(sweep_dir: Path) -> list[FailedVerdict]:
    return _read(sweep_dir, FAILED_VERDICT_MARKER, FailedVerdict)


def record_missed_accuracy(job_dir: Path, job: MissedAccuracy) -> None:
    _write(job_dir, MISSED_ACCURACY_MARKER, job)


def missed_accuracies(sweep_dir: Path) -> list[MissedAccuracy]:
    return _read(sweep_dir, MISSED_ACCURACY_MARKER, MissedAccuracy)
