"""CSV tables as MLflow table artifacts (a run's tables in the MLflow UI), one way for every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def log_csv_table(client: Any, run_id: str, csv_path: Path, artifact_file: str) -> None:
    """Log a CSV file with a header row through `MlflowClient.log_table` (pandas' `split` JSON)."""
    import pandas as pd

    client.log_table(run_id, data=pd.read_csv(csv_path), artifact_file=artifact_file)
