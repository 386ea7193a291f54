"""Where the default MLflow store lives: a sqlite file and an artifact folder under outputs/."""

from __future__ import annotations

from pathlib import Path

DEFAULT_STORE_DIR = Path("outputs")


def default_tracking_uri(store_dir: Path = DEFAULT_STORE_DIR) -> str:
    """sqlite database under outputs/ of the current directory."""
    return f"sqlite:///{(store_dir / 'mlflow.db').resolve()}"


def default_artifact_root(store_dir: Path = DEFAULT_STORE_DIR) -> str:
    """The local artifact folder beside that database, as a file URI."""
    return (store_dir / "mlartifacts").resolve().as_uri()
