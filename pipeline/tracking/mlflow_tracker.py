"""The one MLflow hook: params, tags, batched metrics, artifacts, tables. Stages never import mlflow.

Artifacts go to a local store as hard links to the run dir's files (one copy on disk); a remote
store gets them uploaded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pipeline.cache.file_lock import file_lock
from pipeline.cache.fingerprint import flatten_config
from pipeline.cache.hard_links import link_or_copy
from pipeline.tracking.dependency_logs import quiet_dependency_logs
from pipeline.tracking.liveness import mark_dead_runs_killed, process_tags
from pipeline.tracking.store import artifact_root_for, sqlite_database
from pipeline.tracking.tables import log_csv_table, shown_float
from pipeline.tracking.ui_links import LOCAL_UI, runs_page_url

log = logging.getLogger(__name__)

MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100


class Tracker(Protocol):
    """What the runner reports to; the MLflow implementation is the only one that logs remotely."""

    @property
    def run_id(self) -> str | None: ...

    def start(
        self, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str], config_yaml: str
    ) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None: ...
    def log_artifacts(self, files: Sequence[Path], artifact_dir: str) -> None: ...
    def log_table(self, csv_path: Path, artifact_file: str) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def log_params(self, params: Mapping[str, str]) -> None: ...
    def finish(self, failed: bool, error: str | None = None, killed: bool = False) -> None: ...
    def describe(self) -> str: ...


class NullTracker:
    """Tracking turned off (`tracking=none`)."""

    run_id: str | None = None

    def start(
        self, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        return None

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        return None

    def log_artifacts(self, files: Sequence[Path], artifact_dir: str) -> None:
        return None

    def log_table(self, csv_path: Path, artifact_file: str) -> None:
        return None

    def set_tags(self, tags: Mapping[str, str]) -> None:
        return None

    def log_params(self, params: Mapping[str, str]) -> None:
        return None

    def finish(self, failed: bool, error: str | None = None, killed: bool = False) -> None:
        return None

    def describe(self) -> str:
        return "tracking disabled"


def git_commit() -> str:
    """The project's HEAD commit, or 'unknown' outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def server_reachable(uri: str, timeout_s: float = 3.0) -> bool:
    """True when an http(s) tracking server answers its /health endpoint."""
    if not uri.startswith(("http://", "https://")):
        return True
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialize first use of a sqlite store: concurrent creation crashes MLflow 3.17."""
    db_path = sqlite_database(uri)
    if db_path is None:
        yield
        return
    with file_lock(Path(f"{db_path}.lock")):
        yield


def ensure_experiment(uri: str, experiment: str, artifact_root: str | None = None) -> str:
    """Create the store (under a lock) and the experiment if needed; return its id."""
    from mlflow.tracking import MlflowClient

    quiet_dependency_logs()
    with store_lock(uri):
        client = MlflowClient(tracking_uri=uri)  # MLflow creates and migrates a new store
        found = client.get_experiment_by_name(experiment)
        if found is not None:
            return str(found.experiment_id)
        # A sqlite store keeps its artifacts beside its database, never in ./mlruns of
        # whatever directory the command ran in.
        root = artifact_root or artifact_root_for(uri)
        location = f"{root}/{experiment}" if root else None
        return str(client.create_experiment(experiment, artifact_location=location))


def local_artifact_dir(artifact_uri: str) -> Path | None:
    """The directory of a run's artifacts when the store is a local path, else None (upload)."""
    parsed = urllib.parse.urlparse(artifact_uri)
    if parsed.scheme == "file":
        return Path(urllib.request.url2pathname(parsed.path))
    if parsed.scheme == "" and artifact_uri.startswith("/"):
        return Path(artifact_uri)
    return None


def split_params(
    params: Mapping[str, Any], max_length: int
) -> tuple[dict[str, str], dict[str, str]]:
    """(short params, long params) — long values go to an artifact instead of a param."""
    short: dict[str, str] = {}
    long: dict[str, str] = {}
    for key, value in flatten_config(params).items():
        text = json.dumps(value) if isinstance(value, list | dict) else str(value)
        (long if len(text) > max_length else short)[key[:250]] = text
    return short, long


class MlflowTracker:
    """Logs one pipeline run to MLflow through MlflowClient (no global fluent state)."""

    def __init__(
        self,
        uri: str,
        experiment: str,
        max_param_length: int = 500,
        parent_run_id: str | None = None,
        artifact_root: str | None = None,
    ) -> None:
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.experiment = experiment
        self.max_param_length = max_param_length
        self.parent_run_id = parent_run_id
        self.experiment_id = ensure_experiment(uri, experiment, artifact_root)
        self.client = MlflowClient(tracking_uri=uri)
        self.run_id: str | None = None
        # A local artifact store gets hard links to the run dir's files, not a second copy.
        self.local_artifacts: Path | None = None

    def start(
        self, run_name: str, params: Mapping[str, Any], tags: Mapping[str, str], config_yaml: str
    ) -> None:
        from mlflow.entities import Param, RunTag

        try:
            mark_dead_runs_killed(self.client)
        except Exception as exc:  # housekeeping must never stop a run from starting
            log.warning("could not check for runs of dead processes: %s", exc)
        all_tags = {**process_tags(), **tags}  # a TrackerProcess passes its parent's
        if self.parent_run_id:
            all_tags["mlflow.parentRunId"] = self.parent_run_id
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags)
        self.run_id = run.info.run_id
        self.local_artifacts = local_artifact_dir(run.info.artifact_uri)
        short, long = split_params(params, self.max_param_length)
        items = [Param(k, v) for k, v in short.items()]
        for start in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[start : start + MAX_PARAMS_PER_BATCH])
        if long:
            self.client.log_dict(self.run_id, long, "long_params.json")
            self.client.log_batch(self.run_id, tags=[RunTag("long_params", ",".join(long))])
        self.client.log_text(self.run_id, config_yaml, "config.yaml")

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric

        if not metrics or self.run_id is None:
            return
        now = int(time.time() * 1000)
        items = [Metric(k, shown_float(float(v)), now, step) for k, v in metrics.items()]
        for start in range(0, len(items), MAX_METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=items[start : start + MAX_METRICS_PER_BATCH])

    def log_artifacts(self, files: Sequence[Path], artifact_dir: str) -> None:
        if self.run_id is None:
            return
        for path in files:
            if not path.is_file():
                continue
            if self.local_artifacts is not None:
                link_or_copy(path, self.local_artifacts / artifact_dir / path.name)
            else:
                self.client.log_artifact(self.run_id, str(path), artifact_path=artifact_dir)

    def log_table(self, csv_path: Path, artifact_file: str) -> None:
        """The CSV as an MLflow table (UI: the run's tables)."""
        if self.run_id is not None and csv_path.is_file():
            log_csv_table(self.client, self.run_id, csv_path, artifact_file)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        if self.run_id is None or not tags:
            return
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in tags.items()])

    def log_params(self, params: Mapping[str, str]) -> None:
        """Params decided while the run goes on (e.g. each stage's torch thread count)."""
        from mlflow.entities import Param

        if self.run_id is None or not params:
            return
        self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def finish(self, failed: bool, error: str | None = None, killed: bool = False) -> None:
        """End the run: FINISHED, FAILED, or KILLED when a person interrupted it."""
        if self.run_id is None:
            return
        if error:
            self.set_tags({"error": error})
        status = "KILLED" if killed else "FAILED" if failed else "FINISHED"
        self.client.set_terminated(self.run_id, status=status)

    def run_url(self) -> str | None:
        if self.run_id is None or not self.uri.startswith(("http://", "https://")):
            return None
        return runs_page_url(self.uri, self.experiment_id, self.run_id)

    def describe(self) -> str:
        url = self.run_url()
        where = url or (
            f"{self.uri} (view with: mlflow ui --backend-store-uri {self.uri}, then open "
            f"{runs_page_url(LOCAL_UI, self.experiment_id, self.run_id)})"
        )
        return f"MLflow run {self.run_id} in experiment '{self.experiment}': {where}"
