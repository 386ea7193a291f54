"""Where the default MLflow store lives: a sqlite file and an artifact folder under outputs/.

Any sqlite store keeps its artifacts beside its database file: MLflow's own default would be
`./mlruns` under whatever directory the command happened to run in."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_STORE_DIR = Path("outputs")
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"


def resolve_tracking_uri(given: str | None = None, store_dir: Path = DEFAULT_STORE_DIR) -> str:
    """The store every command uses: `given` (tracking.uri, --uri), else $MLFLOW_TRACKING_URI,
    else the sqlite store under `store_dir` (outputs/ of the current directory)."""
    return str(given or os.environ.get(TRACKING_URI_ENV) or default_tracking_uri(store_dir))


def default_tracking_uri(store_dir: Path = DEFAULT_STORE_DIR) -> str:
    """sqlite database under outputs/ of the current directory."""
    return f"sqlite:///{(store_dir / 'mlflow.db').resolve()}"


def default_artifact_root(store_dir: Path = DEFAULT_STORE_DIR) -> str:
    """The local artifact folder beside that database, as a file URI."""
    return (store_dir / "mlartifacts").resolve().as_uri()


def sqlite_database(uri: str) -> Path | None:
    """The database file of a `sqlite:///PATH` store; None for a server or any other store."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def artifact_root_for(uri: str) -> str | None:
    """The artifact root a new experiment in this store gets: `mlartifacts/` beside a sqlite
    database; None (MLflow's choice) for a server or any other store."""
    database = sqlite_database(uri)
    return None if database is None else default_artifact_root(database.parent)
