"""What one invocation of the pipeline reports: each stage's outcome, its run dir, its tracking run.

Words: an *invocation* is one `run_pipeline` call (one job of a sweep); its *run dir* holds its
files; its *tracking run* is the MLflow run it logs to; the *run stage* executes the program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class StageStatus(StrEnum):
    """A stage ran (`done`), was taken from the cache (`reused`), raised (`failed`), or was
    stopped by Ctrl-C (`interrupted`)."""

    done = "done"
    reused = "reused"
    failed = "failed"
    interrupted = "interrupted"


@dataclass
class StageOutcome:
    """What happened to one stage in this invocation."""

    name: str
    status: StageStatus
    seconds: float
    artifacts: Any = None
    reason: str = ""
    digest: str = ""  # the stage's fingerprint
    torch_threads: int | None = None  # torch's intra-op threads when the stage ran (latencies!)


@dataclass
class PipelineResult:
    """An invocation's run dir, each stage's outcome, and its tracking run (id and description)."""

    run_dir: Path
    stages: list[StageOutcome] = field(default_factory=list)
    tracking_run_id: str | None = None
    tracking: str = ""

    def artifacts(self, stage: str) -> Any:
        for outcome in self.stages:
            if outcome.name == stage:
                return outcome.artifacts
        raise KeyError(f"stage {stage!r} did not run")
