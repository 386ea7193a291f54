"""What a pipeline invocation reports: each stage's outcome and where its files and run went."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class StageStatus(StrEnum):
    """A stage ran (`done`), was taken from the cache (`reused`), or raised (`failed`)."""

    done = "done"
    reused = "reused"
    failed = "failed"


@dataclass
class StageOutcome:
    """What happened to one stage in this run."""

    name: str
    status: StageStatus
    seconds: float
    artifacts: Any = None
    reason: str = ""


@dataclass
class PipelineResult:
    """The run directory, each stage's outcome, and where tracking put the run."""

    run_dir: Path
    stages: list[StageOutcome] = field(default_factory=list)
    run_id: str | None = None
    tracking: str = ""

    def artifacts(self, stage: str) -> Any:
        for outcome in self.stages:
            if outcome.name == stage:
                return outcome.artifacts
        raise KeyError(f"stage {stage!r} did not run")
