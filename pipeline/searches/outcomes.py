"""What one trial (one pipeline job) found, read back from its job dir."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stages.formats.artifacts import ArtifactName
from stages.safe_io.csv_fields import read_dict_rows

FAILED_JOB_MARKER = ".pipeline/job_failed.json"


@dataclass
class TrialOutcome:
    """A trial's overrides and what its run said: verdict, accuracy, first divergence, ops."""

    number: int
    overrides: list[str]
    job_dir: str
    verdict: str = "not_evaluated"
    accuracy_met: bool | None = None
    min_snr_db: float | None = None
    # analyze.task with analyze.accuracy_budget.max_drop: the task drop within it (None: no task
    # budget, or not evaluated); the drop itself (points, or the user metric's units).
    task_met: bool | None = None
    task_drop: float | None = None
    first_divergence_types: list[str] = field(default_factory=list)
    first_divergence_nodes: list[str] = field(default_factory=list)
    delegated_ops: list[str] = field(default_factory=list)
    error: str = ""
    resumed: bool = False
    seconds: float | None = None  # wall clock of the trial's job (its batch's share)

    @property
    def failed(self) -> bool:
        """The job itself failed (an error, not a verdict)."""
        return bool(self.error)

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> TrialOutcome:
        """The outcome a ledger recorded (a non-finite SNR written by name read back as a float)."""
        known = set(cls.__dataclass_fields__)
        outcome = cls(**{k: v for k, v in data.items() if k in known})
        outcome.min_snr_db = _snr(outcome.min_snr_db)
        return outcome


def _snr(value: Any) -> float | None:
    if value is None:
        return None
    return float(value)  # "inf" / "-inf" strings from summary.json included


def _min_snr(accuracy: dict[str, Any]) -> float | None:
    values = [_snr(o.get("snr_db")) for o in accuracy.get("outputs", [])]
    found = [v for v in values if v is not None]
    return min(found) if found else None


def clear_stale_outcome(job_dir: Path) -> None:
    """Remove what `read_outcome` reads from a job dir an earlier, interrupted run left, before
    a trial runs there (a cut program written into it for the trial stays)."""
    for stale in (job_dir / FAILED_JOB_MARKER, job_dir / ArtifactName.SUMMARY_JSON):
        stale.unlink(missing_ok=True)


def read_outcome(number: int, overrides: list[str], job_dir: Path) -> TrialOutcome:
    """The outcome of the trial whose job wrote `job_dir`."""
    outcome = TrialOutcome(number, overrides, str(job_dir))
    marker = job_dir / FAILED_JOB_MARKER
    summary_path = job_dir / ArtifactName.SUMMARY_JSON
    if marker.is_file():
        outcome.error = str(json.loads(marker.read_text()).get("error", "the job failed"))
        return outcome
    if not summary_path.is_file():
        outcome.error = f"the job wrote no {ArtifactName.SUMMARY_JSON} in {job_dir}"
        return outcome
    summary = json.loads(summary_path.read_text())
    accuracy = summary.get("accuracy") or {}
    outcome.verdict = str(summary.get("verdict", "not_evaluated"))
    outcome.accuracy_met = accuracy.get("met")
    outcome.min_snr_db = _min_snr(accuracy)
    task = accuracy.get("task") or {}
    outcome.task_met, outcome.task_drop = task.get("met"), _snr(task.get("drop"))
    first = summary.get("first_divergence") or {}
    outcome.first_divergence_types = [str(t) for t in first.get("op_types") or []]
    outcome.first_divergence_nodes = [str(n) for n in first.get("fault_nodes") or []]
    lowering = job_dir / ArtifactName.LOWERING_REPORT
    if lowering.is_file():
        report = json.loads(lowering.read_text())
        by_partition = [op for p in report.get("partitions", []) for op in p.get("ops", [])]
        # executorch_* backends: the ops ExecuTorch's delegates took, named by provenance
        outcome.delegated_ops = by_partition or [str(o) for o in report.get("delegated_ops", [])]
    return outcome


def local_snr_by_op(job_dir: str) -> dict[str, float]:
    """Per op, the local SNR (dB) its group has in the trial's numeric_gap.csv (the lowest when
    an op is in several groups); empty when the file is absent. Read with fields as long as the
    file (a large partition's row holds every op it covers)."""
    path = Path(job_dir) / ArtifactName.NUMERIC_GAP_CSV
    if not path.is_file():
        return {}
    found: dict[str, float] = {}
    for row in read_dict_rows(path):
        try:
            value = float(row.get("local_snr") or "nan")
            ops = json.loads(row.get("fault_nodes") or "[]")
        except ValueError:
            continue
        for op in ops if isinstance(ops, list) else []:
            if value == value:  # not NaN
                found[str(op)] = min(found.get(str(op), value), value)
    return found
