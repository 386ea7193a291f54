"""A Tracker that holds its calls until the invocation turns out to need a tracking run.

The runner opens the tracking run before the first stage that really runs; if every stage is
reused and an earlier identical invocation's run is still in the store, the held calls are
dropped (pipeline/tracking/unchanged_runs.py) and the child tracking process is stopped unused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.tracking.mlflow_tracker import Tracker


class DeferredTracker:
    """Wraps a Tracker; calls are replayed in order at `begin()` and passed through after."""

    def __init__(self, inner: Tracker) -> None:
        self.inner = inner
        self.begun = False
        self._held: list[tuple[str, tuple[Any, ...]]] = []

    def begin(self) -> None:
        """Open the tracking run now: replay every held call."""
        if self.begun:
            return
        self.begun = True
        held, self._held = self._held, []
        for name, args in held:
            getattr(self.inner, name)(*args)

    def abandon(self) -> None:
        """Drop the held calls; stop the inner tracker's child process if it has one."""
        self._held.clear()
        stop = getattr(self.inner, "abandon", None)
        if callable(stop):
            stop()

    def _call(self, name: str, *args: Any) -> None:
        if self.begun:
            getattr(self.inner, name)(*args)
        else:
            self._held.append((name, args))

    @property
    def run_id(self) -> str | None:
        return self.inner.run_id if self.begun else None

    def start(
        self, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        self._call("start", run_name, params, tags, config_yaml)

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        self._call("log_metrics", dict(metrics), step)

    def log_artifacts(self, files: Sequence[Path], artifact_dir: str) -> None:
        self._call("log_artifacts", list(files), artifact_dir)

    def log_table(self, csv_path: Path, artifact_file: str) -> None:
        self._call("log_table", csv_path, artifact_file)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._call("set_tags", dict(tags))

    def log_params(self, params: Mapping[str, str]) -> None:
        self._call("log_params", dict(params))

    def finish(self, failed: bool, error: str | None = None, killed: bool = False) -> None:
        self.begin()
        self.inner.finish(failed, error, killed)

    def describe(self) -> str:
        return self.inner.describe()
